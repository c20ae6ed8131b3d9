//go:build !windows

package labcmd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/miekg/dns"
	"github.com/spf13/cobra"

	"github.com/runos/vpn/lab/kube"
)

func readWorld(path string) (kube.World, error) {
	var w kube.World
	b, err := os.ReadFile(path)
	if err != nil {
		return w, err
	}
	return w, json.Unmarshal(b, &w)
}

// kubeDNSCmd is the kube-dns stand-in inside a lab cluster.
func kubeDNSCmd() *cobra.Command {
	var world, listen string
	c := &cobra.Command{
		Use:    "kubedns",
		Short:  "The kube-dns stand-in inside a lab cluster",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			w, err := readWorld(world)
			if err != nil {
				return err
			}
			h := kube.NewDNS(w)
			pc, err := net.ListenPacket("udp", listen)
			if err != nil {
				return err
			}
			ln, err := net.Listen("tcp", listen)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "kubedns: %s answering %v\n", listen, h.Names())
			servers := []*dns.Server{{PacketConn: pc, Handler: h}, {Listener: ln, Handler: h}}
			errs := make(chan error, len(servers))
			for _, s := range servers {
				go func() { errs <- s.ActivateAndServe() }()
			}
			select {
			case <-cmd.Context().Done():
				for _, s := range servers {
					_ = s.Shutdown()
				}
				return nil
			case err := <-errs:
				return err
			}
		},
	}
	c.Flags().StringVar(&world, "world", "", "the cluster's Services and pods (JSON)")
	c.Flags().StringVar(&listen, "listen", "", "address to answer on (ip:53)")
	_ = c.MarkFlagRequired("world")
	_ = c.MarkFlagRequired("listen")
	return c
}

// kubeAPICmd is the Kubernetes API stand-in inside a lab cluster.
func kubeAPICmd() *cobra.Command {
	var world, listen, cert, key string
	c := &cobra.Command{
		Use:    "kubeapi",
		Short:  "The Kubernetes API stand-in inside a lab cluster",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			w, err := readWorld(world)
			if err != nil {
				return err
			}
			srv := &http.Server{Addr: listen, Handler: kube.API(w, time.Now()), ReadHeaderTimeout: 10 * time.Second}
			go func() {
				<-cmd.Context().Done()
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				defer cancel()
				_ = srv.Shutdown(ctx)
			}()
			fmt.Fprintf(cmd.ErrOrStderr(), "kubeapi: %s (pods %s)\n", listen, kube.PodNames(w))
			if err := srv.ListenAndServeTLS(cert, key); !errors.Is(err, http.ErrServerClosed) {
				return err
			}
			return nil
		},
	}
	c.Flags().StringVar(&world, "world", "", "the cluster's Services and pods (JSON)")
	c.Flags().StringVar(&listen, "listen", "", "address to serve on (VIP:6443)")
	c.Flags().StringVar(&cert, "cert", "", "PEM certificate")
	c.Flags().StringVar(&key, "key", "", "PEM private key")
	for _, f := range []string{"world", "listen", "cert", "key"} {
		_ = c.MarkFlagRequired(f)
	}
	return c
}
