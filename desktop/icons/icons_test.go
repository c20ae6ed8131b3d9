package icons

import (
	"bytes"
	"encoding/binary"
	"image/png"
	"io/fs"
	"testing"

	"github.com/runos/vpn/desktop/icons/internal/draw"
	"github.com/runos/vpn/desktop/menu"
)

// The committed files are exactly what the generator draws, so they never
// drift from the code.
func TestGeneratedFilesAreCurrent(t *testing.T) {
	want := draw.Files()
	got := map[string]bool{}
	err := fs.WalkDir(files, "data", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		got[d.Name()] = true
		b, _ := files.ReadFile(p)
		if w, ok := want[d.Name()]; !ok {
			t.Errorf("data/%s is not generated any more; delete it", d.Name())
		} else if !bytes.Equal(b, w) {
			t.Errorf("data/%s is stale: run go generate ./desktop/icons", d.Name())
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for name := range want {
		if !got[name] {
			t.Errorf("data/%s missing: run go generate ./desktop/icons", name)
		}
	}
}

func TestEveryIcon(t *testing.T) {
	seen := map[string]menu.Icon{}
	for _, i := range menu.Icons() {
		for _, b := range [][]byte{PNG(i), Template(i)} {
			img, err := png.Decode(bytes.NewReader(b))
			if err != nil {
				t.Fatalf("%v: %v", i, err)
			}
			if s := img.Bounds().Size(); s.X != draw.TraySize || s.Y != draw.TraySize {
				t.Fatalf("%v: size %v", i, s)
			}
		}
		if len(Tray(i)) == 0 {
			t.Fatalf("%v: no tray icon", i)
		}
		if j, dup := seen[string(PNG(i))]; dup {
			t.Fatalf("%v and %v look the same", i, j)
		}
		seen[string(PNG(i))] = i
	}
}

// A template image carries only shape: every pixel is black or clear.
func TestTemplateIsAlphaOnly(t *testing.T) {
	for _, i := range menu.Icons() {
		img := draw.Image(i, draw.TraySize, true)
		for p := 0; p < len(img.Pix); p += 4 {
			if img.Pix[p+3] != 0 && (img.Pix[p] != 0 || img.Pix[p+1] != 0 || img.Pix[p+2] != 0) {
				t.Fatalf("%v: coloured pixel in a template image", i)
			}
		}
	}
}

func TestICOLayout(t *testing.T) {
	b := draw.ICO(menu.IconConnected, draw.ICOSizes...)
	le := binary.LittleEndian
	if le.Uint16(b[0:]) != 0 || le.Uint16(b[2:]) != 1 || int(le.Uint16(b[4:])) != len(draw.ICOSizes) {
		t.Fatalf("header % x", b[:6])
	}
	for n, size := range draw.ICOSizes {
		e := b[6+16*n:]
		if int(e[0]) != size || int(e[1]) != size || le.Uint16(e[6:]) != 32 {
			t.Fatalf("entry %d: % x", n, e[:16])
		}
		length, off := le.Uint32(e[8:]), le.Uint32(e[12:])
		if int(off+length) > len(b) {
			t.Fatalf("entry %d past the end", n)
		}
		dib := b[off : off+length]
		if le.Uint32(dib[0:]) != 40 || int(le.Uint32(dib[4:])) != size || int(le.Uint32(dib[8:])) != 2*size {
			t.Fatalf("entry %d: bad BITMAPINFOHEADER % x", n, dib[:16])
		}
		if want := 40 + size*size*4 + (size+31)/32*4*size; len(dib) != want {
			t.Fatalf("entry %d: %d bytes, want %d", n, len(dib), want)
		}
	}
}

// fyneARGB is what fyne.io/systray v1.12 sends as IconPixmap for a PNG:
// the low byte of each channel of RGBA() (systray_unix.go argbForImage).
func fyneARGB(t *testing.T, b []byte) []byte {
	img, err := png.Decode(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	var out []byte
	for y := 0; y < img.Bounds().Dy(); y++ {
		for x := 0; x < img.Bounds().Dx(); x++ {
			r, g, b, a := img.At(x, y).RGBA()
			out = append(out, byte(a), byte(r), byte(g), byte(b))
		}
	}
	return out
}

// The Linux tray file, through fyne's conversion, gives exactly the
// straight ARGB the StatusNotifierItem spec asks for.
func TestSNIPixmapIsStraightARGB(t *testing.T) {
	for _, i := range menu.Icons() {
		want := draw.Image(i, draw.TraySize, false)
		got := fyneARGB(t, draw.SNIPNG(i, draw.TraySize))
		for p := 0; p < len(want.Pix); p += 4 {
			r, g, b, a := want.Pix[p], want.Pix[p+1], want.Pix[p+2], want.Pix[p+3]
			if a == 0 {
				r, g, b = 0, 0, 0
			}
			if got[p] != a || got[p+1] != r || got[p+2] != g || got[p+3] != b {
				t.Fatalf("%v pixel %d: fyne sends % x, want % x", i, p/4, got[p:p+4], []byte{a, r, g, b})
			}
		}
	}
}
