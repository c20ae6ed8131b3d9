package benchplot

import (
	"fmt"
	"image/color"
	"math"
	"os"
	"slices"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// figure is a plot with its size.
type figure struct {
	p    *plot.Plot
	w, h vg.Length
}

// save writes the figure as SVG (the format follows the file's extension).
func (f *figure) save(path string) error {
	wt, err := f.p.WriterTo(f.w, f.h, "svg")
	if err != nil {
		return err
	}
	out, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := wt.WriteTo(out); err != nil {
		out.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	return out.Close()
}

func newPlot(title, x, y string) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = x
	p.Y.Label.Text = y
	p.Add(plotter.NewGrid())
	return p
}

// boxes adds one box plot per named sample set, in order, skipping empty
// ones; it returns how many it drew.
func boxes(p *plot.Plot, sets []named) (int, error) {
	var vs []any
	for _, s := range sets {
		if len(s.v) == 0 {
			continue
		}
		vs = append(vs, s.name, plotter.Values(s.v))
	}
	if len(vs) == 0 {
		return 0, nil
	}
	return len(vs) / 2, plotutil.AddBoxPlots(p, vg.Points(28), vs...)
}

type named struct {
	name string
	v    []float64
}

// moveRunPlot is one move benchmark run: control's switchMs and the
// laptops' own view of it.
func moveRunPlot(d *Doc) (*figure, error) {
	p := newPlot(fmt.Sprintf("Move switch time, %.0f laptops, %.0f moves (%s)", d.param("clients"), d.param("moves"), d.Machine.Commit),
		"", "ms from the move command")
	n, err := boxes(p, []named{
		{"prepare\n(target listening)", d.Samples["control-prepare-ms"]},
		{"control\nswitchMs", d.Samples["control-switch-ms"]},
		{"each laptop:\nstatus peerUp", d.Samples["laptop-status-ms"]},
		{"slowest laptop\nper move", d.Samples["last-laptop-status-ms"]},
	})
	if err != nil || n == 0 {
		return nil, err
	}
	return &figure{p, 18 * vg.Centimeter, 10 * vg.Centimeter}, nil
}

// movePlot is the switch time distribution per laptop count: control's
// switchMs and each laptop's time, pooled over every run with that many.
func movePlot(docs []*Doc) (*figure, error) {
	if len(docs) == 0 {
		return nil, nil
	}
	type group struct{ ctl, laptops []float64 }
	groups := map[int]*group{}
	for _, d := range docs {
		n := int(d.param("clients"))
		if groups[n] == nil {
			groups[n] = &group{}
		}
		g := groups[n]
		g.ctl = append(g.ctl, d.Samples["control-switch-ms"]...)
		g.laptops = append(g.laptops, d.Samples["laptop-status-ms"]...)
	}
	counts := make([]int, 0, len(groups))
	for n := range groups {
		counts = append(counts, n)
	}
	slices.Sort(counts)
	var sets []named
	for _, n := range counts {
		g := groups[n]
		sets = append(sets,
			named{fmt.Sprintf("%d laptops\ncontrol switchMs\n(n=%d)", n, len(g.ctl)), g.ctl},
			named{fmt.Sprintf("%d laptops\neach laptop's status\n(n=%d)", n, len(g.laptops)), g.laptops})
	}
	p := newPlot("Move switch time by number of laptops (target: p99 under 1 s)", "", "ms from the move command")
	k, err := boxes(p, sets)
	if err != nil || k == 0 {
		return nil, err
	}
	return &figure{p, vg.Length(max(18, 4*k)) * vg.Centimeter, 11 * vg.Centimeter}, nil
}

// connectPlot is the connect-to-peerUp distribution as cumulative curves
// (log time axis: the medians are milliseconds, the tail a hundred).
func connectPlot(docs []*Doc) (*figure, error) {
	if len(docs) == 0 {
		return nil, nil
	}
	d := docs[len(docs)-1]
	p := newPlot(fmt.Sprintf("Connect to peerUp, %.0f rounds (%s)", d.param("rounds"), d.Machine.Commit),
		"ms (log scale)", "fraction of rounds at or under")
	p.X.Scale = plot.LogScale{}
	p.X.Tick.Marker = plot.LogTicks{Prec: -1}
	// Bottom right, clear of the curves: they rise between 0.2 and 20 ms
	// and the tail comes back at ~110 ms.
	p.Legend.Top = false
	p.Legend.Left = false
	p.Legend.XOffs = -12 * vg.Millimeter
	p.Legend.YOffs = 8 * vg.Millimeter
	var vs []any
	for _, s := range []named{
		{"local API: connect → status peerUp", d.Samples["api-status-ms"]},
		{"CLI: exec → status peerUp", d.Samples["cli-status-ms"]},
		{"CLI: command's wall time", d.Samples["cli-wall-ms"]},
		{"floor: bare WireGuard handshake", d.Samples["floor-handshake-ms"]},
		{"floor: control round trip (warm)", d.Samples["floor-control-rtt-warm-ms"]},
	} {
		if xy := ecdf(s.v); xy != nil {
			vs = append(vs, s.name, xy)
		}
	}
	if len(vs) == 0 {
		return nil, nil
	}
	if err := plotutil.AddLines(p, vs...); err != nil {
		return nil, err
	}
	return &figure{p, 18 * vg.Centimeter, 11 * vg.Centimeter}, nil
}

// ecdf is the empirical cumulative distribution of positive samples.
func ecdf(v []float64) plotter.XYs {
	s := slices.DeleteFunc(slices.Clone(v), func(x float64) bool { return x <= 0 })
	if len(s) == 0 {
		return nil
	}
	slices.Sort(s)
	xy := make(plotter.XYs, len(s))
	for i, x := range s {
		xy[i] = plotter.XY{X: x, Y: float64(i+1) / float64(len(s))}
	}
	return xy
}

// throughputPlot shows the per-round throughput ratios (log scale: runos
// is ~5× the stock pair and ~0.15 of the bare link). A relay ratio is
// drawn when the document has one.
func throughputPlot(docs []*Doc) (*figure, error) {
	if len(docs) == 0 {
		return nil, nil
	}
	d := docs[len(docs)-1]
	p := newPlot(fmt.Sprintf("TCP throughput ratios per round, %.0f rounds of %.0f s (%s)", d.param("rounds"), d.param("iperfSeconds"), d.Machine.Commit),
		"", "ratio (log scale)")
	p.Y.Scale = plot.LogScale{}
	p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	var sets []named
	for _, k := range []string{"runos-vs-stock", "runos-vs-bare", "stock-vs-bare", "relay-vs-runos", "relay-vs-bare"} {
		sets = append(sets, named{k, d.Samples[k]})
	}
	n, err := boxes(p, sets)
	if err != nil || n == 0 {
		return nil, err
	}
	one, err := plotter.NewLine(plotter.XYs{{X: -0.5, Y: 1}, {X: float64(n) - 0.5, Y: 1}})
	if err != nil {
		return nil, err
	}
	one.Color = color.Gray{Y: 128}
	one.Dashes = []vg.Length{vg.Points(3), vg.Points(3)}
	p.Add(one)
	return &figure{p, 16 * vg.Centimeter, 10 * vg.Centimeter}, nil
}

// fanOutPlot is the time from a change's commit to the last device's
// answer against the number of devices: every round, and the median per
// device count; control's own last write beside it.
func fanOutPlot(rounds []FanOutRound) (*figure, error) {
	if len(rounds) == 0 {
		return nil, nil
	}
	byN, ns := byDevices(rounds)
	var allPts, writtenPts, allMed, writtenMed plotter.XYs
	for _, n := range ns {
		all, written := times(byN[n])
		for i := range all {
			allPts = append(allPts, plotter.XY{X: float64(n), Y: all[i]})
			writtenPts = append(writtenPts, plotter.XY{X: float64(n), Y: written[i]})
		}
		allMed = append(allMed, plotter.XY{X: float64(n), Y: median(all)})
		writtenMed = append(writtenMed, plotter.XY{X: float64(n), Y: median(written)})
	}
	p := newPlot(fmt.Sprintf("Fan-out of one change to N long-polls (%d rounds)", len(rounds)), "devices", "ms from the commit")
	if err := plotutil.AddScatters(p, "each round: last device answered", allPts, "each round: control's last answer written", writtenPts); err != nil {
		return nil, err
	}
	if err := plotutil.AddLines(p, "median: last device", allMed, "median: control's last write", writtenMed); err != nil {
		return nil, err
	}
	return devicesFigure(p, ns), nil
}

// fanOutStreamsPlot is fanOutPlot's medians for push streams and for
// long-polls side by side (one session's runs), with every round's last
// device; rounds across control replicas (Replicas > 0) add a median line
// per replica count and kind, with a mark at each device count: such runs
// are few and far apart (10,000, 50,000, 100,000 devices), one point may
// be all a line has.
func fanOutStreamsPlot(rounds []FanOutRound) (*figure, error) {
	if len(rounds) == 0 {
		return nil, nil
	}
	var st, lp []FanOutRound
	byReplicas := map[int][]FanOutRound{}
	for _, r := range rounds {
		switch {
		case r.Replicas > 0:
			byReplicas[r.Replicas] = append(byReplicas[r.Replicas], r)
		case r.Stream:
			st = append(st, r)
		default:
			lp = append(lp, r)
		}
	}
	title := fmt.Sprintf("Fan-out of one change: push streams vs long-polls (%d rounds)", len(rounds))
	if len(byReplicas) > 0 {
		title = fmt.Sprintf("Fan-out of one change: streams vs long-polls, one process and replicas (%d rounds)", len(rounds))
	}
	p := newPlot(title, "devices", "ms from the commit")
	var lines, points []any
	var all []int
	for _, kind := range []struct {
		name   string
		rounds []FanOutRound
	}{{"streams", st}, {"long-polls", lp}} {
		if len(kind.rounds) == 0 {
			continue
		}
		byN, ns := byDevices(kind.rounds)
		var pts, allMed, writtenMed plotter.XYs
		for _, n := range ns {
			a, w := times(byN[n])
			for _, v := range a {
				pts = append(pts, plotter.XY{X: float64(n), Y: v})
			}
			allMed = append(allMed, plotter.XY{X: float64(n), Y: median(a)})
			writtenMed = append(writtenMed, plotter.XY{X: float64(n), Y: median(w)})
		}
		all = append(all, ns...)
		lines = append(lines, kind.name+": median, last device", allMed, kind.name+": median, control's last write", writtenMed)
		points = append(points, kind.name+": each round, last device", pts)
	}
	if len(lines) > 0 {
		if err := plotutil.AddLines(p, lines...); err != nil {
			return nil, err
		}
		if err := plotutil.AddScatters(p, points...); err != nil {
			return nil, err
		}
	}
	legend := len(lines)/2 + len(points)/2
	ns, n, err := addReplicaLines(p, byReplicas)
	if err != nil {
		return nil, err
	}
	all = append(all, ns...)
	legend += n
	slices.Sort(all)
	f := devicesFigure(p, slices.Compact(all))
	top := 0.0
	for _, r := range rounds {
		top = max(top, r.AllMs)
	}
	// Room above the rounds for the legend, a tenth of the height a line
	// (six lines: 1.6 times the top).
	p.Y.Max = math.Ceil(top*(1+0.1*float64(legend))/1000) * 1000
	return f, nil
}

// addReplicaLines draws the median time to the last device per device
// count, one line per replica count and kind, in dark colours and dashed
// (the one-process lines are soft and mostly solid); it returns the
// device counts drawn and how many lines.
func addReplicaLines(p *plot.Plot, byReplicas map[int][]FanOutRound) (ns []int, lines int, err error) {
	counts := make([]int, 0, len(byReplicas))
	for k := range byReplicas {
		counts = append(counts, k)
	}
	slices.Sort(counts)
	for _, k := range counts {
		var st, lp []FanOutRound
		for _, r := range byReplicas[k] {
			if r.Stream {
				st = append(st, r)
			} else {
				lp = append(lp, r)
			}
		}
		for _, kind := range []struct {
			name   string
			rounds []FanOutRound
		}{{"streams", st}, {"long-polls", lp}} {
			if len(kind.rounds) == 0 {
				continue
			}
			byN, devs := byDevices(kind.rounds)
			var med plotter.XYs
			for _, n := range devs {
				a, _ := times(byN[n])
				med = append(med, plotter.XY{X: float64(n), Y: median(a)})
			}
			l, pts, err := plotter.NewLinePoints(med)
			if err != nil {
				return nil, 0, err
			}
			// From the third colour and glyph on: the first two (red
			// rings, green squares) are the one-process rounds'.
			c := plotutil.DarkColors[(2+lines)%len(plotutil.DarkColors)]
			l.Color, l.Dashes = c, plotutil.Dashes(4+lines)
			pts.Color, pts.Shape, pts.Radius = c, plotutil.Shape(2+lines), vg.Points(3)
			p.Add(l, pts)
			name := fmt.Sprintf("%s, %d replicas: median, last device", kind.name, k)
			if k == 1 {
				name = kind.name + ", 1 replica: median, last device"
			}
			p.Legend.Add(name, l, pts)
			ns = append(ns, devs...)
			lines++
		}
	}
	return ns, lines, nil
}

// byDevices groups rounds by their number of devices, and lists those
// numbers in order.
func byDevices(rounds []FanOutRound) (map[int][]FanOutRound, []int) {
	byN := map[int][]FanOutRound{}
	for _, r := range rounds {
		byN[r.Devices] = append(byN[r.Devices], r)
	}
	ns := make([]int, 0, len(byN))
	for n := range byN {
		ns = append(ns, n)
	}
	slices.Sort(ns)
	return byN, ns
}

// times is the rounds' times to the last device and to control's last
// write.
func times(rounds []FanOutRound) (all, written []float64) {
	for _, r := range rounds {
		all = append(all, r.AllMs)
		written = append(written, r.WrittenMs)
	}
	return all, written
}

// devicesFigure sizes a plot against the number of devices, a tick at
// each count measured.
func devicesFigure(p *plot.Plot, ns []int) *figure {
	p.Legend.Top = true
	p.Legend.Left = true
	p.X.Min = 0
	p.X.Max = float64(ns[len(ns)-1]) * 1.08 // room for the last tick's label
	p.Y.Min = 0
	p.X.Tick.Marker = plot.TickerFunc(func(lo, hi float64) []plot.Tick {
		return deviceTicks(append([]int{0}, ns...), hi-lo)
	})
	return &figure{p, 16 * vg.Centimeter, 11 * vg.Centimeter}
}

// deviceTicks is a tick at each count, labelled from the right (the
// largest counts first) as long as a label clears the one to its right:
// with 100,000 devices on the axis, 0, 1000 and 5000 would overprint.
// Those left unlabelled stay as minor ticks.
func deviceTicks(ns []int, span float64) []plot.Tick {
	// A digit is about a 70th of the axis (16 cm wide, 10-point labels).
	digit := span / 70
	t := make([]plot.Tick, len(ns))
	right := math.Inf(1) // the left edge of the last label drawn
	for i := len(ns) - 1; i >= 0; i-- {
		label := strconv.Itoa(ns[i])
		half := float64(len(label)) * digit / 2
		t[i] = plot.Tick{Value: float64(ns[i])}
		if float64(ns[i])+half+digit/2 <= right {
			t[i].Label = label
			right = float64(ns[i]) - half
		}
	}
	return t
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	return s[len(s)/2]
}
