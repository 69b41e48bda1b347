// Command vigil is the vigil CLI: it runs a module's roles, renders its
// manifests and drives the embedded control plane. See `vigil --help`.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/vigilkit/vigil/internal/commands/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Execute(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
