// Package draw paints RunOS Desktop's tray icons: a shield (the VPN) whose
// colour and glyph say the state. It runs at build time only (go generate
// in desktop/icons); the app embeds the PNG and ICO files it writes.
package draw

import (
	"bytes"
	"encoding/binary"
	"image"
	"image/color"
	"image/png"
	"math"

	"github.com/runos/vpn/desktop/menu"
)

// Colours of the regular icons.
var (
	grey  = color.NRGBA{0x8a, 0x8f, 0x98, 0xff}
	blue  = color.NRGBA{0x3b, 0x7d, 0xdd, 0xff}
	amber = color.NRGBA{0xe0, 0x9a, 0x20, 0xff}
	green = color.NRGBA{0x2e, 0x9e, 0x5b, 0xff}
	red   = color.NRGBA{0xd6, 0x45, 0x45, 0xff}
	white = color.NRGBA{0xff, 0xff, 0xff, 0xff}
	black = color.NRGBA{0, 0, 0, 0xff}
	clear = color.NRGBA{}
)

// style is how one state looks.
type style struct {
	body   color.NRGBA
	filled bool // a solid shield (else an outline)
	glyph  func(x, y float64) bool
}

func styleOf(i menu.Icon) style {
	switch i {
	case menu.IconConnected:
		return style{green, true, check}
	case menu.IconConnecting:
		return style{amber, true, dots}
	case menu.IconSignIn:
		return style{blue, false, keyhole}
	case menu.IconError:
		return style{red, true, bang}
	}
	return style{grey, false, nil}
}

// shield reports whether (x, y), in [-1, 1]² with y down, is inside a
// shield scaled by k about its centre.
func shield(x, y, k float64) bool {
	x, y = x/k, (y-0.02)/k
	const w = 0.74
	if math.Abs(x) > w {
		return false
	}
	top := -0.86 + 0.12*(x/w)*(x/w)
	if y < top {
		return false
	}
	if y < 0.08 {
		return true
	}
	d := (y - 0.08) / 0.84
	return d <= 1 && math.Abs(x) <= w*math.Sqrt(1-d*d)
}

func segment(x, y, ax, ay, bx, by, r float64) bool {
	dx, dy := bx-ax, by-ay
	t := ((x-ax)*dx + (y-ay)*dy) / (dx*dx + dy*dy)
	t = math.Max(0, math.Min(1, t))
	px, py := ax+t*dx-x, ay+t*dy-y
	return px*px+py*py <= r*r
}

func disc(x, y, cx, cy, r float64) bool { return (x-cx)*(x-cx)+(y-cy)*(y-cy) <= r*r }

func check(x, y float64) bool {
	return segment(x, y, -0.36, 0.02, -0.1, 0.28, 0.09) || segment(x, y, -0.1, 0.28, 0.38, -0.24, 0.09)
}

func dots(x, y float64) bool {
	return disc(x, y, -0.32, 0.0, 0.11) || disc(x, y, 0, 0.0, 0.11) || disc(x, y, 0.32, 0.0, 0.11)
}

func bang(x, y float64) bool {
	return segment(x, y, 0, -0.48, 0, 0.1, 0.09) || disc(x, y, 0, 0.36, 0.1)
}

func keyhole(x, y float64) bool {
	if disc(x, y, 0, -0.14, 0.17) {
		return true
	}
	if y < -0.1 || y > 0.38 {
		return false
	}
	half := 0.06 + 0.08*(y+0.1)/0.48
	return math.Abs(x) <= half
}

// at is the colour of one sample. In a template icon (macOS) only alpha
// counts, so the glyph is cut out of the shield instead of painted white.
func (st style) at(x, y float64, template bool) color.NRGBA {
	body := st.body
	if template {
		body = black
	}
	inside := shield(x, y, 1)
	if !st.filled && inside && shield(x, y, 0.74) {
		inside = false // an outline: hollow inside
	}
	if st.glyph != nil && st.glyph(x, y) {
		switch {
		case st.filled && template:
			return clear
		case st.filled:
			return white
		default:
			return body
		}
	}
	if inside {
		return body
	}
	return clear
}

// Image paints the icon for i at size×size pixels, 4×4 samples a pixel.
func Image(i menu.Icon, size int, template bool) *image.NRGBA {
	return styleOf(i).paint(size, template)
}

// AppImage is the application's own icon (Finder, the .app bundle): the
// shield in blue with a check.
func AppImage(size int) *image.NRGBA {
	return style{blue, true, check}.paint(size, false)
}

func (st style) paint(size int, template bool) *image.NRGBA {
	img := image.NewNRGBA(image.Rect(0, 0, size, size))
	const n = 4
	for py := 0; py < size; py++ {
		for px := 0; px < size; px++ {
			var r, g, b, a float64
			for sy := 0; sy < n; sy++ {
				for sx := 0; sx < n; sx++ {
					x := (float64(px)+(float64(sx)+0.5)/n)/float64(size)*2 - 1
					y := (float64(py)+(float64(sy)+0.5)/n)/float64(size)*2 - 1
					c := st.at(x, y, template)
					fa := float64(c.A) / 255
					r, g, b, a = r+float64(c.R)*fa, g+float64(c.G)*fa, b+float64(c.B)*fa, a+fa
				}
			}
			if a == 0 {
				continue
			}
			img.SetNRGBA(px, py, color.NRGBA{uint8(r/a + 0.5), uint8(g/a + 0.5), uint8(b/a + 0.5), uint8(a/(n*n)*255 + 0.5)})
		}
	}
	return img
}

// PNG encodes the icon as PNG.
func PNG(i menu.Icon, size int, template bool) []byte {
	var buf bytes.Buffer
	if err := png.Encode(&buf, Image(i, size, template)); err != nil {
		panic(err) // encoding an in-memory NRGBA image cannot fail
	}
	return buf.Bytes()
}

// SNIPNG encodes the icon for fyne.io/systray on Linux and the BSDs. The
// StatusNotifierItem spec wants straight (not premultiplied) ARGB bytes;
// fyne builds them from a decoded image's RGBA() by keeping the low byte of
// each premultiplied 16-bit channel, which is only right for opaque and
// clear pixels and turns antialiased edges into coloured fringes. This
// 16-bit PNG is made so that exactly those low bytes are the straight
// 8-bit colour: alpha A becomes A·0x101, and each colour channel the
// 16-bit value whose premultiplied form ends in the wanted byte. (Viewed
// as an ordinary PNG its edges look pale; it is meant for fyne only.)
func SNIPNG(i menu.Icon, size int) []byte {
	src := Image(i, size, false)
	dst := image.NewNRGBA64(src.Rect)
	for y := 0; y < size; y++ {
		for x := 0; x < size; x++ {
			c := src.NRGBAAt(x, y)
			if c.A == 0 {
				continue
			}
			a := uint32(c.A) * 0x101
			dst.SetNRGBA64(x, y, color.NRGBA64{R: lowByte(c.R, a), G: lowByte(c.G, a), B: lowByte(c.B, a), A: uint16(a)})
		}
	}
	var buf bytes.Buffer
	if err := png.Encode(&buf, dst); err != nil {
		panic(err)
	}
	return buf.Bytes()
}

// lowByte returns the 16-bit straight channel c16 for which the
// premultiplied value c16·a/0xffff (what color.NRGBA64.RGBA computes) has
// want as its low byte, taking the largest such value so the high byte
// stays as close to the real colour as it can.
func lowByte(want uint8, a uint32) uint16 {
	v := a&^0xff | uint32(want)
	if v > a {
		v -= 0x100
	}
	// Smallest c16 with c16·a/0xffff ≥ v; integer division then gives v.
	c := (v*0xffff + a - 1) / a
	for c*a/0xffff < v {
		c++
	}
	return uint16(min(c, 0xffff))
}

// ICO encodes the icon as a Windows .ico holding one 32-bit DIB per size
// (the classic layout every Windows version loads, unlike PNG entries).
func ICO(i menu.Icon, sizes ...int) []byte {
	var dir, data bytes.Buffer
	le := binary.LittleEndian
	_ = binary.Write(&dir, le, [3]uint16{0, 1, uint16(len(sizes))}) // reserved, type icon, count
	offset := 6 + 16*len(sizes)
	for _, size := range sizes {
		dib := dibOf(Image(i, size, false))
		_ = binary.Write(&dir, le, struct {
			W, H, Colors, Reserved uint8
			Planes, BPP            uint16
			Bytes, Offset          uint32
		}{uint8(size % 256), uint8(size % 256), 0, 0, 1, 32, uint32(len(dib)), uint32(offset)})
		data.Write(dib)
		offset += len(dib)
	}
	return append(dir.Bytes(), data.Bytes()...)
}

// dibOf is a BITMAPINFOHEADER, bottom-up BGRA rows and the AND mask.
func dibOf(img *image.NRGBA) []byte {
	w, h := img.Rect.Dx(), img.Rect.Dy()
	maskRow := (w + 31) / 32 * 4
	var b bytes.Buffer
	le := binary.LittleEndian
	_ = binary.Write(&b, le, struct {
		Size         uint32
		W, H         int32
		Planes, BPP  uint16
		Compression  uint32
		ImageSize    uint32
		XPPM, YPPM   int32
		Used, Needed uint32
	}{40, int32(w), int32(2 * h), 1, 32, 0, uint32(w*h*4 + maskRow*h), 0, 0, 0, 0})
	for y := h - 1; y >= 0; y-- {
		for x := 0; x < w; x++ {
			c := img.NRGBAAt(x, y)
			b.Write([]byte{c.B, c.G, c.R, c.A})
		}
	}
	for y := h - 1; y >= 0; y-- {
		row := make([]byte, maskRow)
		for x := 0; x < w; x++ {
			if img.NRGBAAt(x, y).A == 0 {
				row[x/8] |= 0x80 >> (x % 8)
			}
		}
		b.Write(row)
	}
	return b.Bytes()
}

// Sizes of the generated files.
const (
	TraySize = 32 // Linux StatusNotifierItem pixmap and the macOS template (16 pt @2x)
)

// ICOSizes are the images in each .ico.
var ICOSizes = []int{16, 32}

// Files is every generated file by name: <icon>.png, <icon>-template.png,
// <icon>-sni.png and <icon>.ico for each menu.Icon.
func Files() map[string][]byte {
	out := map[string][]byte{}
	for _, i := range menu.Icons() {
		out[i.String()+".png"] = PNG(i, TraySize, false)
		out[i.String()+"-template.png"] = PNG(i, TraySize, true)
		out[i.String()+".ico"] = ICO(i, ICOSizes...)
		out[i.String()+"-sni.png"] = SNIPNG(i, TraySize)
	}
	return out
}
