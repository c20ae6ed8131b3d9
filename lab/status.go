//go:build !windows

package lab

import (
	"context"
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
