package oidctest

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
)

// Admin verbs: what a team's administrator does to a user at the
// provider while they are signed in somewhere.
const (
	AdminRemove  = "remove"
	AdminDisable = "disable"
	AdminEnable  = "enable"
)

// AdminHandler changes users while the provider runs, for a provider
// served by a process of its own (the lab's): POST /users/{verb} with the
// form field email. Serve it where only the lab reaches it (a unix socket),
// never next to the provider's own pages.
func (p *Provider) AdminHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /users/{verb}", func(w http.ResponseWriter, r *http.Request) {
		email := strings.TrimSpace(r.FormValue("email"))
		if email == "" {
			http.Error(w, "no email given", http.StatusBadRequest)
			return
		}
		switch r.PathValue("verb") {
		case AdminRemove:
			p.RemoveUser(email)
		case AdminDisable:
			p.DisableUser(email, true)
		case AdminEnable:
			p.DisableUser(email, false)
		default:
			http.Error(w, "unknown verb: want remove, disable or enable", http.StatusNotFound)
			return
		}
		fmt.Fprintf(w, "%s %s\n", r.PathValue("verb"), email)
	})
	return mux
}

// AdminDo asks the AdminHandler at base (through hc) to apply verb to the
// user with that email.
func AdminDo(ctx context.Context, hc *http.Client, base, verb, email string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/users/"+url.PathEscape(verb),
		strings.NewReader(url.Values{"email": {email}}.Encode()))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("identity provider: %s %s: %w", verb, email, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("identity provider: %s %s: %s: %s", verb, email, resp.Status, strings.TrimSpace(string(b)))
	}
	return nil
}
