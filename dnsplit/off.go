package dnsplit

import "context"

// off is ModeOff: it changes nothing and says why. It is only ever chosen
// by configuration, so it reports no error: cluster names then resolve as
// they did before the VPN, which is what was asked for.
type off struct{ reason string }

func newOff(reason string) *off { return &off{reason: reason} }

func (o *off) Set(context.Context, []Route) error { return nil }

func (o *off) Status() Status { return Status{Mode: ModeOff, Reason: o.reason} }

func (o *off) Close() error { return nil }
