package cli

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// pickCluster asks, on a terminal, which of the account's clusters runos
// vpn up connects when there is no default, and offers to remember the
// choice (runos config set cid). asked is false where there is no
// terminal to ask on (a script, a pipe): up then keeps its error naming
// the clusters and how to choose.
func (a *app) pickCluster(available []string) (cid string, asked bool, err error) {
	in, ok := a.env.Stdin.(io.Writer) // an *os.File is both
	if a.env.Stdin == nil || !ok || !a.env.IsTerminal(in) || !a.env.IsTerminal(a.env.Stderr) {
		return "", false, nil
	}
	w, r := a.env.Stderr, bufio.NewReader(a.env.Stdin)
	fmt.Fprintf(w, "Your account has %d clusters and no default:\n", len(available))
	for i, c := range available {
		fmt.Fprintf(w, "  %d) %s\n", i+1, c)
	}
	for tries := 0; cid == ""; tries++ {
		if tries == 3 {
			return "", true, usagef("no cluster chosen; pass --cid <cid> or set a default with `runos config set cid <cid>`")
		}
		fmt.Fprintf(w, "Connect which one? [1-%d] ", len(available))
		line, rerr := r.ReadString('\n')
		line = strings.TrimSpace(line)
		if n, err := strconv.Atoi(line); err == nil && n >= 1 && n <= len(available) {
			cid = available[n-1]
		} else if i := index(available, line); line != "" && i >= 0 {
			cid = line
		} else if rerr != nil {
			return "", true, usagef("no cluster chosen (%v); pass --cid <cid>", rerr)
		}
	}
	fmt.Fprintf(w, "Make %s your default (runos config set cid %s)? [y/N] ", cid, cid)
	line, _ := r.ReadString('\n')
	if ans := strings.ToLower(strings.TrimSpace(line)); ans == "y" || ans == "yes" {
		if err := a.rememberCID(cid); err != nil {
			return "", true, err
		}
		fmt.Fprintf(w, "Saved: your default cluster is %s.\n", cid)
	}
	return cid, true, nil
}

func index(list []string, s string) int {
	for i, v := range list {
		if v == s {
			return i
		}
	}
	return -1
}

// rememberCID is runos config set cid CID.
func (a *app) rememberCID(cid string) error {
	c, path, err := a.loadConfig()
	if err != nil {
		return err
	}
	if err := c.Set("cid", cid); err != nil {
		return fmt.Errorf("remember %s as the default cluster: %w", cid, err)
	}
	return c.Save(path)
}
