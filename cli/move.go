package cli

import (
	"context"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/spf13/cobra"

	"github.com/runos/vpn/api"
)

type moveFlags struct {
	cid, target    string
	follow, asJSON bool
	timeout        time.Duration
}

func (a *app) wgMoveCmd() *cobra.Command {
	var f moveFlags
	c := &cobra.Command{
		Use:   "move ID",
		Short: "Move the user-VPN server to another node; devices follow by themselves",
		Long: `Move the cluster's user-VPN server to another node. Nothing is reissued and
nobody runs anything on a laptop: the target node brings the server up with
its own key, control pushes the new node, key and address to every device,
each device re-handshakes, and the old node stops serving.

Before anything moves it prints the address devices will be given (the
target's declared ingress address, else its detected public address) and
warns when that changes between private and public: most routers will not
hairpin a public address back inside, so machines on your own network would
usually lose the tunnel.

--follow shows the steps live, devices switched out of total, and the time
from the command to the last device's handshake; a failed move exits
non-zero with the reason, and then nothing changed for the devices.
--json prints the final move with the plan's warnings.`,
		Example: `  runos services wireguard move wg-ky3 --cid ky3 --target-node-id n2 --follow
  runos services wireguard move wg-ky3 --cid ky3 --target-node-id n2 --follow --json | jq .switchMs`,
		Args: exactArgs("ID"),
		RunE: a.run(func(cmd *cobra.Command, args []string) error { return a.wgMove(cmd.Context(), args[0], f) }),
	}
	addCIDFlag(c, &f.cid)
	c.Flags().StringVar(&f.target, "target-node-id", "", "the node to move the server to (required)")
	c.Flags().BoolVar(&f.follow, "follow", false, "show the steps live until every device switched")
	c.Flags().DurationVar(&f.timeout, "timeout", defaultFollowTimeout, "with --follow, how long to wait")
	c.Flags().BoolVar(&f.asJSON, "json", false, "print the move (with the plan's warnings) as JSON")
	_ = c.MarkFlagRequired("target-node-id")
	return c
}

// moveResult is the --json form: the final Move, with the warnings of the
// plan and of the move together.
type moveResult struct {
	*api.Move
	Warnings []string      `json:"warnings"`
	Plan     *api.MovePlan `json:"plan"`
	// SwitchMs is from this command's start to the last device's
	// handshake (0 until done): control's own figure, which starts when
	// it took the move, plus the command's time before it asked (the
	// plan request and start-up; only the request's one-way trip is not
	// counted, as the two clocks cannot be compared). ControlSwitchMs is
	// control's figure as it gave it.
	SwitchMs        int64 `json:"switchMs"`
	ControlSwitchMs int64 `json:"controlSwitchMs"`
}

// commandSwitchMs is the switch time seen from the command: lead is how
// long the command ran before asking control to move.
func commandSwitchMs(m *api.Move, lead time.Duration) int64 {
	if m.State != api.MoveDone {
		return 0
	}
	return m.SwitchMs + lead.Milliseconds()
}

func mergeWarnings(lists ...[]string) []string {
	out := []string{}
	for _, l := range lists {
		for _, w := range l {
			if !slices.Contains(out, w) {
				out = append(out, w)
			}
		}
	}
	return out
}

// planLines is what the operator reads before anything moves.
func planLines(p *api.MovePlan) []string {
	l := fmt.Sprintf("Devices will be given %s", endpointKind(p.Endpoint, p.AddressKind))
	if p.PreviousEndpoint != "" {
		l += fmt.Sprintf(", instead of %s", endpointKind(p.PreviousEndpoint, p.PreviousAddressKind))
	}
	lines := []string{l + "."}
	for _, w := range p.Warnings {
		lines = append(lines, "warning: "+w)
	}
	return lines
}

func (a *app) wgMove(ctx context.Context, id string, f moveFlags) error {
	start := a.env.Now()
	if err := checkTimeout(f.timeout); err != nil {
		return err
	}
	cid, err := a.clusterID(f.cid)
	if err != nil {
		return err
	}
	what := fmt.Sprintf("move service %s of %s to %s", id, cid, f.target)
	out := a.env.Stdout
	if f.asJSON {
		out = a.env.Stderr // stdout carries only the JSON
	}
	plan, err := opCall(ctx, a, what, func(ctx context.Context, c *api.Client) (*api.MovePlan, error) {
		return c.MovePlan(ctx, cid, id, f.target)
	})
	if err != nil {
		return err
	}
	shown := planLines(plan)
	for _, l := range shown {
		fmt.Fprintln(out, l)
	}
	lead := a.env.Now().Sub(start)
	m, err := opChange(ctx, a, what, "runos services wireguard show "+id+" --cid "+cid, func(ctx context.Context, c *api.Client) (*api.Move, error) {
		return c.StartMove(ctx, cid, id, f.target)
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "Moving %s from %s to %s (move %s).\n", id, m.FromNodeID, m.TargetNodeID, m.ID)
	if f.follow {
		m, err = a.followMove(ctx, out, m, f.timeout, shown, lead)
	} else if m.State != api.MoveDone && m.State != api.MoveFailed {
		fmt.Fprintf(out, "Started; devices switch by themselves. Run with --follow to watch them, or check with `runos services wireguard show %s --cid %s`.\n", id, cid)
	}
	if f.asJSON {
		res := moveResult{Move: m, Warnings: mergeWarnings(plan.Warnings, m.Warnings), Plan: plan,
			SwitchMs: commandSwitchMs(m, lead), ControlSwitchMs: m.SwitchMs}
		if jerr := printJSON(a.env.Stdout, res); jerr != nil && err == nil {
			err = jerr
		}
	}
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if m.State == api.MoveFailed {
		return fmt.Errorf("%s: failed: %s; devices were not changed", what, orUnknown(m.Error))
	}
	return nil
}

// moveFollower prints what changed between two versions of a move.
type moveFollower struct {
	w        io.Writer
	steps    int
	switched int
	total    int
	printed  bool     // a devices line was printed
	shown    []string // lines printed before following (the plan's warnings): not repeated
}

func (mf *moveFollower) show(m *api.Move) {
	for ; mf.steps < len(m.Steps); mf.steps++ {
		s := m.Steps[mf.steps]
		if slices.Contains(mf.shown, s.Text) {
			continue
		}
		fmt.Fprintf(mf.w, "  %7s  %s\n", "+"+fmtSince(s.At, m.StartedAt), s.Text)
	}
	// While switching, every change of the count; once done, the final
	// summary line says it (after the steps, which already say "done").
	if m.State == api.MoveSwitching {
		if !mf.printed || m.Devices.Switched != mf.switched || m.Devices.Total != mf.total {
			fmt.Fprintf(mf.w, "  devices switched %d/%d\n", m.Devices.Switched, m.Devices.Total)
			mf.switched, mf.total, mf.printed = m.Devices.Switched, m.Devices.Total, true
		}
	}
}

// fmtSince is a step's offset from the move's start: "0.123s".
func fmtSince(at, start time.Time) string {
	if at.IsZero() || start.IsZero() {
		return "0.000s"
	}
	return fmt.Sprintf("%.3fs", at.Sub(start).Seconds())
}

// followMove follows the move until it is done or failed (a push stream,
// or long-polls from an older control).
func (a *app) followMove(ctx context.Context, out io.Writer, m *api.Move, timeout time.Duration, shown []string, lead time.Duration) (*api.Move, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	c, src, err := a.operator()
	if err != nil {
		return m, err
	}
	mf := &moveFollower{w: out, shown: shown}
	show := func(next *api.Move) bool {
		m = next
		mf.show(m)
		return m.State == api.MoveDone || m.State == api.MoveFailed
	}
	if !show(m) {
		err = followDoc(ctx, m.Version, func(m *api.Move) uint64 { return m.Version },
			func(ctx context.Context, since uint64, each func(*api.Move) error) error {
				return c.WatchMove(ctx, m.ID, since, each)
			},
			func(ctx context.Context, since uint64) (*api.Move, error) { return c.Move(ctx, m.ID, since, pollWait) },
			show)
	}
	switch {
	case err != nil && ctx.Err() != nil:
		return m, fmt.Errorf("move %s is still %s after %s (%d/%d devices switched)", m.ID, m.State, timeout, m.Devices.Switched, m.Devices.Total)
	case err != nil:
		return m, controlErr("follow move "+m.ID, src, err)
	case m.State == api.MoveDone:
		fmt.Fprintf(out, "Done: %d/%d devices switched; %d ms from the command to the last device's handshake (%d ms after control took the move).\n",
			m.Devices.Switched, m.Devices.Total, commandSwitchMs(m, lead), m.SwitchMs)
	}
	return m, nil // a failed move: the caller reports it
}
