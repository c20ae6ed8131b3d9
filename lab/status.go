//go:build !windows

package lab

import (
	"context"
	"strings"
	"time"

	"github.com/runos/vpn/vpnd/localapi"
)

// Status is `runos-lab status`: the lab's hosts, whether each recorded
// process still runs, and each laptop daemon's view.
type Status struct {
	Dir    string `json:"dir"`
	Prefix string `json:"prefix"`
	Ready  bool   `json:"ready"`
	APIURL string `json:"apiUrl"`
	// PrometheusURL is the lab's Prometheus (up --metrics), reached from
	// inside the lab; "" without it.
	PrometheusURL string         `json:"prometheusUrl,omitempty"`
	Hosts         []HostStatus   `json:"hosts"`
	Laptops       []LaptopStatus `json:"laptops"`
	Control       *ControlStatus `json:"control"`
}

// HostStatus is one host of Status.
type HostStatus struct {
	Name      string            `json:"name"`
	Netns     string            `json:"netns"`
	Addresses map[string]string `json:"addresses"`
	Processes []ProcStatus      `json:"processes"`
}

// ProcStatus is one process of a host.
type ProcStatus struct {
	Name  string `json:"name"`
	PID   int    `json:"pid"`
	Alive bool   `json:"alive"`
	Log   string `json:"log"`
}

// LaptopStatus is a laptop daemon's status, or why it could not be read.
type LaptopStatus struct {
	Host   string           `json:"host"`
	Socket string           `json:"socket"`
	Status *localapi.Status `json:"status,omitempty"`
	Error  string           `json:"error,omitempty"`
}

// Inspect reads a running lab's status.
func (l *Lab) Inspect(ctx context.Context) *Status {
	rec := l.j.snapshot()
	st := &Status{Dir: l.dir, Prefix: l.names.Prefix, Ready: rec.Ready, APIURL: l.apiURL(), PrometheusURL: l.PrometheusURL()}
	for _, h := range l.env.Hosts {
		hs := HostStatus{Name: h.Name, Netns: h.Netns, Addresses: h.Addresses}
		for _, p := range rec.Procs {
			if p.Host == h.Name {
				hs.Processes = append(hs.Processes, ProcStatus{Name: p.Name, PID: p.PID, Alive: p.Alive(), Log: p.Log})
			}
		}
		st.Hosts = append(st.Hosts, hs)
	}
	st.Control = l.inspectControl(ctx)
	for _, c := range l.env.Clients {
		ls := LaptopStatus{Host: c.Host, Socket: c.Socket}
		cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		s, err := localapi.NewClient(c.Socket).Status(cctx)
		cancel()
		if err != nil {
			ls.Error = err.Error()
		} else {
			ls.Status = s
		}
		st.Laptops = append(st.Laptops, ls)
	}
	return st
}

// ControlStatus is control's side of Status: its store, each replica, the
// database and the balancer.
type ControlStatus struct {
	Store    string          `json:"store"`
	Replicas []ReplicaStatus `json:"replicas"`
	Database *ServiceStatus  `json:"database,omitempty"`
	Balancer *BalancerStatus `json:"balancer,omitempty"`
}

// ReplicaStatus is one runos-control: its own URL and its /readyz.
type ReplicaStatus struct {
	Host  string `json:"host"`
	URL   string `json:"url"`
	Ready bool   `json:"ready"`
	Error string `json:"error,omitempty"`
}

// ServiceStatus is whether a server of the lab answers.
type ServiceStatus struct {
	Host  string `json:"host"`
	Ready bool   `json:"ready"`
	Error string `json:"error,omitempty"`
}

// BalancerStatus is HAProxy: where it listens and what it thinks of each
// replica (UP, DOWN, DRAIN, MAINT; the backups serve only when none is UP).
type BalancerStatus struct {
	URL     string            `json:"url"`
	Servers map[string]string `json:"servers"`
	Error   string            `json:"error,omitempty"`
}

func (l *Lab) inspectControl(ctx context.Context) *ControlStatus {
	cs := &ControlStatus{Store: l.topo.Store}
	for _, h := range l.topo.ControlHosts() {
		rs := ReplicaStatus{Host: h.Name, URL: "https://" + h.Addrs[WAN].String()}
		cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		if _, err := l.Get(cctx, h.Name, rs.URL+"/readyz"); err != nil {
			rs.Error = err.Error()
		} else {
			rs.Ready = true
		}
		cancel()
		cs.Replicas = append(cs.Replicas, rs)
	}
	if l.topo.Store == StorePostgres {
		ds := &ServiceStatus{Host: "db"}
		cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		if err := l.databaseReady(cctx); err != nil {
			ds.Error = err.Error()
		} else {
			ds.Ready = true
		}
		cancel()
		cs.Database = ds
	}
	if l.topo.Replicas > 1 {
		bs := &BalancerStatus{URL: l.apiURL(), Servers: map[string]string{}}
		out, err := l.Balancer(ctx, "show stat")
		if err != nil {
			bs.Error = err.Error()
		}
		for _, line := range strings.Split(out, "\n") {
			f := strings.Split(line, ",")
			if len(f) > 17 && f[0] == "replicas" && f[1] != "BACKEND" {
				bs.Servers[f[1]] = f[17]
			}
		}
		cs.Balancer = bs
	}
	return cs
}
