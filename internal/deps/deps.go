// Package deps pins the project's chosen dependencies in go.mod while the
// packages that use them are being written; it is removed once they are.
package deps

import (
	_ "github.com/chromedp/chromedp"
	_ "github.com/godbus/dbus/v5"
	_ "github.com/kardianos/service"
	_ "github.com/miekg/dns"
	_ "github.com/pkg/browser"
	_ "github.com/spf13/cobra"
	_ "github.com/vishvananda/netlink"
	_ "github.com/zalando/go-keyring"
	_ "golang.org/x/crypto/bcrypt"
	_ "golang.org/x/oauth2"
	_ "golang.org/x/sync/errgroup"
	_ "golang.org/x/sys/unix"
	_ "golang.zx2c4.com/wireguard/device"
	_ "golang.zx2c4.com/wireguard/tun"
	_ "golang.zx2c4.com/wireguard/wgctrl"
	_ "modernc.org/sqlite"
)
