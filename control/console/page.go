package console

import (
	"bytes"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/runos/vpn/api"
	"github.com/runos/vpn/internal/httpjson"
)

var funcs = template.FuncMap{
	"when": func(t time.Time) string {
		if t.IsZero() {
			return "never"
		}
		return t.UTC().Format("2006-01-02 15:04:05 UTC")
	},
	"iso": func(t time.Time) string { return t.UTC().Format(time.RFC3339) },
	"inFlight": func(m *api.Move) bool {
		return m != nil && (m.State == api.MovePreparing || m.State == api.MoveSwitching)
	},
}

// sections are the parts of the page the live stream replaces, by id.
func (c *Console) sections(v *view) (map[string]string, error) {
	names := []string{"clusters"}
	if v.ShowAudit {
		names = append(names, "audit")
	}
	if v.ShowUsers {
		names = append(names, "users")
	}
	if !v.Operator {
		names = append(names, "mine")
	}
	out := map[string]string{}
	for _, n := range names {
		var b bytes.Buffer
		if err := c.tmpl.ExecuteTemplate(&b, n, v); err != nil {
			return nil, err
		}
		out[n] = b.String()
	}
	return out, nil
}

func (c *Console) write(w http.ResponseWriter, status int, name string, data any) {
	var b bytes.Buffer
	if err := c.tmpl.ExecuteTemplate(&b, name, data); err != nil {
		c.log.Error("console: render", "template", name, "err", err)
		http.Error(w, "the console failed to render", http.StatusInternalServerError)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Content-Length", strconv.Itoa(b.Len()))
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Security-Policy", csp)
	w.WriteHeader(status)
	_, _ = w.Write(b.Bytes())
}

// message is a page with a title, a text and, if signIn, a link to sign in.
func (c *Console) message(w http.ResponseWriter, status int, title, text string, signIn bool) {
	c.write(w, status, "message", map[string]any{"Title": title, "Text": text, "SignIn": signIn})
}

// page is GET /console: the whole page, or the way to sign in.
func (c *Console) page(w http.ResponseWriter, r *http.Request) {
	tok := c.sessionToken(r)
	if tok == "" {
		http.Redirect(w, r, "/console/login", http.StatusSeeOther)
		return
	}
	v, _, err := c.load(c.ctx(r), c.client(tok))
	if errors.Is(err, errSignedOut) {
		c.setCookie(w, "runos-console", "", -1)
		http.Redirect(w, r, "/console/login", http.StatusSeeOther)
		return
	}
	if err != nil {
		c.log.Error("console: load", "err", err)
		c.message(w, http.StatusBadGateway, "The console is unavailable", "Control could not answer: "+err.Error(), false)
		return
	}
	c.write(w, http.StatusOK, "page", v)
}

// revoke is an operator's Revoke button.
func (c *Console) revoke(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	c.act(w, r, "Revoke "+id, func(cl *api.Client) (string, error) {
		d, err := cl.RevokeDevice(c.ctx(r), id)
		if err != nil {
			return "", err
		}
		return "Revoked " + d.Name + " of " + d.User + ": its session ended and its key is refused.", nil
	})
}

// remove is a user's Remove button on one of their own devices.
func (c *Console) remove(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	c.act(w, r, "Remove "+id, func(cl *api.Client) (string, error) {
		if err := cl.RemoveMyDevice(c.ctx(r), id); err != nil {
			return "", err
		}
		return "Removed " + id + ": it is signed out, its key is refused and its address is free.", nil
	})
}

// removeUser is Remove on a user of an account (an operator's, or a user's
// a manage-users rule lets): the user's sessions end and their devices
// leave every gateway at once.
func (c *Console) removeUser(w http.ResponseWriter, r *http.Request) {
	aid, email := r.PathValue("aid"), r.PathValue("email")
	c.act(w, r, "Remove "+email+" from "+aid, func(cl *api.Client) (string, error) {
		out, err := cl.RemoveUser(c.ctx(r), aid, email)
		if err != nil {
			return "", err
		}
		if out.Elsewhere {
			return fmt.Sprintf("Removed %s from %s: %d device(s) left its clusters; their sessions are kept for their other accounts.", out.Email, aid, len(out.Cut)), nil
		}
		return fmt.Sprintf("Removed %s from %s: %d session(s) ended, %d device(s) removed.", out.Email, aid, len(out.Sessions), len(out.Devices)), nil
	})
}

// setPolicy is Save on an account's access policy (an operator's, or a
// user's a set-policy rule lets): the
// document as edited, set through the API (which refuses a version that is
// not newer, or a document with bad lines, each named).
func (c *Console) setPolicy(w http.ResponseWriter, r *http.Request) {
	aid := r.PathValue("aid")
	c.act(w, r, "Setting the policy of "+aid, func(cl *api.Client) (string, error) {
		p, err := cl.SetPolicy(c.ctx(r), aid, r.PostFormValue("document"))
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("Policy version %d of %s is in force: the gateways enforce it now.", p.Version, aid), nil
	})
}

// act runs an action after the CSRF check. The page's script asks for
// JSON and lets the live stream show the change; without the script the
// browser is sent back to the page (or shown the refusal).
func (c *Console) act(w http.ResponseWriter, r *http.Request, what string, fn func(*api.Client) (string, error)) {
	tok := c.sessionToken(r)
	asJSON := strings.Contains(r.Header.Get("Accept"), "application/json")
	fail := func(status int, msg string) {
		if asJSON {
			_ = httpjson.Write(w, status, map[string]string{"error": msg})
			return
		}
		c.message(w, status, what+" failed", msg, status == http.StatusUnauthorized)
	}
	if err := c.checkPost(r, tok); err != nil {
		fail(http.StatusForbidden, err.Error())
		return
	}
	msg, err := fn(c.client(tok))
	if err != nil {
		var ae *api.Error
		switch {
		case errors.Is(refused(err), errSignedOut):
			fail(http.StatusUnauthorized, "your console session ended: sign in again")
		case errors.As(err, &ae) && len(ae.Details) > 0:
			fail(ae.Status, ae.Error()+": "+strings.Join(ae.Details, "; "))
		case errors.As(err, &ae):
			fail(ae.Status, ae.Error())
		default:
			fail(http.StatusBadGateway, err.Error())
		}
		return
	}
	if asJSON {
		_ = httpjson.Write(w, http.StatusOK, map[string]string{"message": msg})
		return
	}
	http.Redirect(w, r, "/console", http.StatusSeeOther)
}
