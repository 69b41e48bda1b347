package modcli

// A module's image holds its binary and nothing else: no CA bundle. The
// binary carries Mozilla's root certificates instead, which Go uses when
// the system supplies none (x509.SetFallbackRoots), so that a gate, a
// Sample or a handler calling an HTTPS service verifies it in the image as
// it does on a developer's machine. A mounted bundle (SSL_CERT_FILE,
// SSL_CERT_DIR) still wins.
import _ "golang.org/x/crypto/x509roots/fallback"
