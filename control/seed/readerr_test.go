package seed

import (
	"context"
	"errors"
	"net/netip"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/runos/vpn/control/model"
	"github.com/runos/vpn/control/pool"
	"github.com/runos/vpn/control/store"
)

// failingStore's reads of one kind of record fail (a disk error, a locked
// database), as the real store's can.
type failingStore struct {
	store.Store
	kind string // user, account, cluster, node or service
}

var errRead = errors.New("disk I/O error")

type failingReader struct {
	store.Writer
	kind string
}

func (r failingReader) User(e string) (model.User, error) {
	if r.kind == "user" {
		return model.User{}, errRead
	}
	return r.Writer.User(e)
}

func (r failingReader) Account(a string) (model.Account, error) {
	if r.kind == "account" {
		return model.Account{}, errRead
	}
	return r.Writer.Account(a)
}

func (r failingReader) Cluster(c string) (model.Cluster, error) {
	if r.kind == "cluster" {
		return model.Cluster{}, errRead
	}
	return r.Writer.Cluster(c)
}

func (r failingReader) Node(c, n string) (model.Node, error) {
	if r.kind == "node" {
		return model.Node{}, errRead
	}
	return r.Writer.Node(c, n)
}

func (r failingReader) Service(id string) (model.Service, error) {
	if r.kind == "service" {
		return model.Service{}, errRead
	}
	return r.Writer.Service(id)
}

func (s failingStore) View(ctx context.Context, fn func(store.Reader) error) error {
	// Reads go through a writer's methods: Update rolls it back.
	_, err := s.Store.Update(ctx, func(w store.Writer) error {
		if err := fn(failingReader{w, s.kind}); err != nil {
			return err
		}
		return errRollback
	})
	if errors.Is(err, errRollback) {
		return nil
	}
	return err
}

var errRollback = errors.New("rollback")

func (s failingStore) Update(ctx context.Context, fn func(store.Writer) error) (store.Change, error) {
	return s.Store.Update(ctx, func(w store.Writer) error { return fn(failingReader{w, s.kind}) })
}

// TestImportFailsOnReadErrors: a record that could not be read is not
// "already there": the import fails, saying so, and writes nothing.
func TestImportFailsOnReadErrors(t *testing.T) {
	w, err := Parse([]byte(labWorld))
	if err != nil {
		t.Fatal(err)
	}
	services, _ := pool.NewServices(netip.MustParsePrefix("100.100.0.0/16"))
	opt := Options{Services: services, BcryptCost: bcrypt.MinCost, Now: time.Now()}
	for _, kind := range []string{"user", "account", "cluster", "node", "service"} {
		st := openStore(t)
		sum, err := Import(context.Background(), failingStore{st, kind}, w, opt)
		if !errors.Is(err, errRead) {
			t.Errorf("%s reads failing: import = %+v, %v; want the read error", kind, sum, err)
		}
		_ = st.View(context.Background(), func(r store.Reader) error {
			if v, _ := r.GlobalVersion(); v != 0 {
				t.Errorf("%s reads failing: the import wrote (version %d)", kind, v)
			}
			return nil
		})
	}
}
