package lru

import "testing"

func TestForgetsLeastRecentlyUsed(t *testing.T) {
	c := New[string, int](2)
	c.Put("a", 1)
	c.Put("b", 2)
	if v, ok := c.Get("a"); !ok || v != 1 { // a is now the most recent
		t.Fatalf("a = %d, %v", v, ok)
	}
	c.Put("c", 3) // full: b goes
	if _, ok := c.Get("b"); ok {
		t.Fatal("b kept although least recently used")
	}
	for k, want := range map[string]int{"a": 1, "c": 3} {
		if v, ok := c.Get(k); !ok || v != want {
			t.Fatalf("%s = %d, %v; want %d", k, v, ok, want)
		}
	}
	if c.Len() != 2 {
		t.Fatalf("len %d", c.Len())
	}
}

func TestUpdate(t *testing.T) {
	c := New[string, int](10)
	add := func(v int, ok bool) (int, bool) { return v + 1, true }
	c.Update("k", add)
	if got := c.Update("k", add); got != 2 {
		t.Fatalf("after two adds: %d", got)
	}
	c.Update("k", func(int, bool) (int, bool) { return 0, false })
	if _, ok := c.Get("k"); ok || c.Len() != 0 {
		t.Fatal("update with keep=false did not delete")
	}
	c.Put("x", 1)
	c.Delete("x")
	if c.Len() != 0 {
		t.Fatal("delete kept the entry")
	}
}
