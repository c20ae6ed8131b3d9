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
