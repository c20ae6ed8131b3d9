// Command runos is the RunOS command line: the user VPN (runos vpn …), the
// daemon (runos vpnd) and the operator verbs. See package cli.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/runos/vpn/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Main(ctx, os.Args[1:], cli.OSEnv())
	stop()
	os.Exit(code)
}
