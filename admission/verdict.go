package admission

import "net/http"

// Verdict is a validation's answer.
type Verdict struct {
	denied   bool
	code     int32
	message  string
	warnings []string
}

// Allow admits the object.
func Allow() Verdict { return Verdict{} }

// Deny refuses the object with a message for the client (403 Forbidden).
func Deny(message string) Verdict {
	return Verdict{denied: true, code: http.StatusForbidden, message: message}
}

// DenyCode refuses the object with an HTTP status code of 400 or more.
func DenyCode(code int32, message string) Verdict {
	if code < 400 {
		code = http.StatusForbidden
	}
	return Verdict{denied: true, code: code, message: message}
}

// Warn admits the object with warnings the client shows its user.
func Warn(warnings ...string) Verdict { return Verdict{warnings: warnings} }

// WithWarnings adds warnings to a verdict.
func (v Verdict) WithWarnings(warnings ...string) Verdict {
	v.warnings = append(append([]string(nil), v.warnings...), warnings...)
	return v
}

// Allowed reports whether the verdict admits the object.
func (v Verdict) Allowed() bool { return !v.denied }

// Message is the denial's message.
func (v Verdict) Message() string { return v.message }

// Warnings are the verdict's warnings.
func (v Verdict) Warnings() []string { return v.warnings }

// Code is the denial's HTTP status code (403 unless DenyCode set another);
// 0 when the verdict allows.
func (v Verdict) Code() int32 { return v.code }
