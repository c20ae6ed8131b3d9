package logring

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

func TestRingKeepsTheLastLinesInOrder(t *testing.T) {
	r := New(3)
	fmt.Fprint(r, "one\ntwo\nthr")
	if got, _ := r.Lines(); !slices.Equal(got, []string{"one", "two"}) {
		t.Fatalf("before the partial line ends: %q", got)
	}
	fmt.Fprint(r, "ee\nfour\nfive\n")
	got, dropped := r.Lines()
	if !slices.Equal(got, []string{"three", "four", "five"}) || dropped != 2 {
		t.Fatalf("got %q dropped %d; want three four five, 2 dropped", got, dropped)
	}
}

func TestRingCutsHugeLines(t *testing.T) {
	r := New(2)
	fmt.Fprint(r, strings.Repeat("x", 3*maxLine), "\nnext\n")
	got, _ := r.Lines()
	if len(got) != 2 || len(got[0]) != maxLine || got[1] != "next" {
		t.Fatalf("got %d lines, first %d bytes: %q", len(got), len(got[0]), got[1:])
	}
}
