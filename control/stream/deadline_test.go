package stream

import (
	"testing"
	"time"
)

func TestSharedDeadline(t *testing.T) {
	d := sharedDeadline{timeout: time.Minute, every: time.Hour}
	a, b := d.context(), d.context()
	if a != b {
		t.Fatal("two visits within every got two contexts")
	}
	dl, ok := a.Deadline()
	if !ok || time.Until(dl) > time.Minute || time.Until(dl) < 59*time.Second {
		t.Fatalf("deadline %v (%v), want a minute from now", dl, ok)
	}
	d = sharedDeadline{timeout: 20 * time.Millisecond, every: 0}
	c := d.context()
	<-c.Done() // ends by itself
	if d.context() == c {
		t.Fatal("a context past every was given again")
	}
}
