package formlogin

import (
	"bytes"
	"net/url"
	"strings"

	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"
)

// document is what the scripted browser needs of a page.
type document struct {
	forms []*form
	text  string // visible text, one line per block
	alert string // the text of the first role="alert" element
}

type field struct{ name, value string }

type submitButton struct{ name, value string }

// form is one <form> with its successful controls in document order.
type form struct {
	action, method string
	fields         []field
	buttons        []submitButton
	pressed        int // index into buttons; the first by default
}

func (f *form) has(name string) bool {
	for _, x := range f.fields {
		if x.name == name {
			return true
		}
	}
	return false
}

func (f *form) set(name, value string) {
	for i := range f.fields {
		if f.fields[i].name == name {
			f.fields[i].value = value
			return
		}
	}
}

func (f *form) press(value string) {
	for i, b := range f.buttons {
		if b.value == value {
			f.pressed = i
			return
		}
	}
}

func (f *form) clone() *form {
	c := *f
	c.fields = append([]field(nil), f.fields...)
	return &c
}

// values is the form data set a browser would send (HTML §4.10.21.4):
// the controls in order, then the pressed button if it has a name.
func (f *form) values() url.Values {
	v := url.Values{}
	for _, x := range f.fields {
		v.Add(x.name, x.value)
	}
	if f.pressed < len(f.buttons) && f.buttons[f.pressed].name != "" {
		b := f.buttons[f.pressed]
		v.Add(b.name, b.value)
	}
	return v
}

func parse(raw []byte) (*document, error) {
	root, err := html.Parse(bytes.NewReader(raw))
	if err != nil {
		return nil, err
	}
	d := &document{}
	var text strings.Builder
	var walk func(n *html.Node, f *form)
	walk = func(n *html.Node, f *form) {
		switch n.Type {
		case html.TextNode:
			if t := strings.Join(strings.Fields(n.Data), " "); t != "" {
				if text.Len() > 0 && !strings.HasSuffix(text.String(), "\n") {
					text.WriteByte(' ')
				}
				text.WriteString(t)
			}
			return
		case html.ElementNode:
			switch n.DataAtom {
			case atom.Script, atom.Style, atom.Head, atom.Template:
				return
			case atom.Form:
				f = &form{action: attr(n, "action"), method: attr(n, "method")}
				d.forms = append(d.forms, f)
			case atom.Input, atom.Button, atom.Select, atom.Textarea:
				if f != nil {
					addControl(f, n)
				}
			}
			if attr(n, "role") == "alert" && d.alert == "" {
				d.alert = strings.Join(strings.Fields(nodeText(n)), " ")
			}
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c, f)
		}
		if n.Type == html.ElementNode && isBlock(n.DataAtom) && text.Len() > 0 && !strings.HasSuffix(text.String(), "\n") {
			text.WriteByte('\n')
		}
	}
	walk(root, nil)
	d.text = strings.TrimSpace(text.String())
	return d, nil
}

func addControl(f *form, n *html.Node) {
	name := attr(n, "name")
	_, disabled := attrOK(n, "disabled")
	if disabled {
		return
	}
	switch n.DataAtom {
	case atom.Button:
		if t := strings.ToLower(attr(n, "type")); t == "" || t == "submit" {
			f.buttons = append(f.buttons, submitButton{name, attr(n, "value")})
		}
	case atom.Input:
		switch t := strings.ToLower(attr(n, "type")); t {
		case "submit":
			f.buttons = append(f.buttons, submitButton{name, attr(n, "value")})
		case "button", "reset", "image", "file":
		case "checkbox", "radio":
			if _, checked := attrOK(n, "checked"); checked && name != "" {
				v, ok := attrOK(n, "value")
				if !ok {
					v = "on"
				}
				f.fields = append(f.fields, field{name, v})
			}
		default:
			if name != "" {
				f.fields = append(f.fields, field{name, attr(n, "value")})
			}
		}
	case atom.Textarea:
		if name != "" {
			f.fields = append(f.fields, field{name, nodeText(n)})
		}
	case atom.Select:
		if name != "" {
			f.fields = append(f.fields, field{name, selected(n)})
		}
	}
}

// selected is a single select's value: the selected option, else the first.
func selected(n *html.Node) string {
	var first, sel *html.Node
	var find func(*html.Node)
	find = func(c *html.Node) {
		if c.Type == html.ElementNode && c.DataAtom == atom.Option {
			if first == nil {
				first = c
			}
			if _, ok := attrOK(c, "selected"); ok && sel == nil {
				sel = c
			}
		}
		for k := c.FirstChild; k != nil; k = k.NextSibling {
			find(k)
		}
	}
	find(n)
	if sel == nil {
		sel = first
	}
	if sel == nil {
		return ""
	}
	if v, ok := attrOK(sel, "value"); ok {
		return v
	}
	return strings.TrimSpace(nodeText(sel))
}

func attr(n *html.Node, key string) string {
	v, _ := attrOK(n, key)
	return v
}

func attrOK(n *html.Node, key string) (string, bool) {
	for _, a := range n.Attr {
		if a.Namespace == "" && a.Key == key {
			return a.Val, true
		}
	}
	return "", false
}

func nodeText(n *html.Node) string {
	var b strings.Builder
	var walk func(*html.Node)
	walk = func(c *html.Node) {
		if c.Type == html.TextNode {
			b.WriteString(c.Data)
		}
		for k := c.FirstChild; k != nil; k = k.NextSibling {
			walk(k)
		}
	}
	walk(n)
	return b.String()
}

func isBlock(a atom.Atom) bool {
	switch a {
	case atom.P, atom.Div, atom.H1, atom.H2, atom.H3, atom.Main, atom.Form, atom.Li, atom.Br, atom.Title, atom.Label, atom.Section, atom.Body:
		return true
	}
	return false
}
