package auth

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"

	"github.com/pkg/browser"
)

// SystemOpener runs $BROWSER when set (URL appended as the last argument,
// or replacing %s; the value may hold arguments, split as a shell would),
// else github.com/pkg/browser where a browser can show (a display on
// Linux, no SSH session): elsewhere it does not try, and SignIn goes
// straight to the device code.
func SystemOpener(getenv func(string) string) Opener {
	return &systemOpener{getenv: getenv, stderr: os.Stderr}
}

type systemOpener struct {
	getenv func(string) string
	// The command's output goes here, never to stdout, which may be
	// carrying --json.
	stderr io.Writer
}

// Open starts the browser and returns once it started.
func (o *systemOpener) Open(url string) error {
	_, err := o.start(url)
	return err
}

// start runs the browser in the background: a terminal browser or a
// scripted one may run until the sign-in is over, so nothing waits for it
// here. exited reports how it ended.
func (o *systemOpener) start(url string) (<-chan error, error) {
	exited := make(chan error, 1)
	env := ""
	if o.getenv != nil {
		env = strings.TrimSpace(o.getenv("BROWSER"))
	}
	if env == "" {
		if why := headless(o.getenv); why != "" {
			return nil, errNoDisplay{why}
		}
		go func() {
			if err := browser.OpenURL(url); err != nil {
				exited <- fmt.Errorf("%v (set BROWSER to the command that opens your browser)", err)
				return
			}
			exited <- nil
		}()
		return exited, nil
	}
	argv, err := browserCommand(env, url)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = o.stderr, o.stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("BROWSER=%q: %w", env, err)
	}
	go func() {
		if err := cmd.Wait(); err != nil {
			exited <- fmt.Errorf("BROWSER=%q: %w", env, err)
			return
		}
		exited <- nil
	}()
	return exited, nil
}

// browserCommand is the argv $BROWSER asks for with url: %s replaced
// wherever it appears, else url appended.
func browserCommand(env, url string) ([]string, error) {
	argv, err := splitShell(env)
	if err != nil {
		return nil, fmt.Errorf("BROWSER=%q: %w", env, err)
	}
	if len(argv) == 0 || argv[0] == "" {
		return nil, fmt.Errorf("BROWSER=%q names no command", env)
	}
	replaced := false
	for i, a := range argv {
		if strings.Contains(a, "%s") {
			argv[i] = strings.ReplaceAll(a, "%s", url)
			replaced = true
		}
	}
	if !replaced {
		argv = append(argv, url)
	}
	return argv, nil
}

// splitShell splits s into words the way a POSIX shell does, with quoting
// (single, double, backslash) and no expansion of any kind: the words are
// run directly, never by a shell.
func splitShell(s string) ([]string, error) {
	var words []string
	var cur strings.Builder
	inWord := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		case c == '\\':
			if i+1 == len(s) {
				return nil, errors.New("ends with a lone backslash")
			}
			i++
			if s[i] != '\n' { // backslash-newline joins lines
				cur.WriteByte(s[i])
				inWord = true
			}
		case c == '\'':
			j := strings.IndexByte(s[i+1:], '\'')
			if j < 0 {
				return nil, errors.New("has an unterminated single quote")
			}
			cur.WriteString(s[i+1 : i+1+j])
			i += 1 + j
			inWord = true
		case c == '"':
			i++
			for ; i < len(s) && s[i] != '"'; i++ {
				if s[i] == '\\' && i+1 < len(s) && strings.IndexByte("$`\"\\\n", s[i+1]) >= 0 {
					i++
					if s[i] == '\n' {
						continue
					}
				}
				cur.WriteByte(s[i])
			}
			if i == len(s) {
				return nil, errors.New("has an unterminated double quote")
			}
			inWord = true
		default:
			cur.WriteByte(c)
			inWord = true
		}
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words, nil
}

// available says why no browser would show, or nil: SignIn asks before
// printing anything about a browser.
func (o *systemOpener) available() error {
	if why := headless(o.getenv); why != "" {
		return errNoDisplay{why}
	}
	return nil
}
