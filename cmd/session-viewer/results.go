package main

import (
	"encoding/base64"
	"fmt"
	"html"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/agentbox/agentbox/kernel"
	"github.com/agentbox/agentbox/session"
)

// resultView is one rich result of an execution, as recorded: the value of
// its trailing expression ("execute_result") or something it displayed
// ("display_data"), such as a matplotlib figure.
type resultView struct {
	Kind string `json:"kind"`
	// Data maps MIME types to their text, as the history keeps it: images
	// in base64, or a note in their place when they were too large to keep.
	Data map[string]string `json:"data"`
	// Figure is the artifact that stores this result's PNG image
	// (ARTIFACT_FIGURES), when there is one, with its download URL.
	Figure *artifactView `json:"figure,omitempty"`
}

// fromOutputs returns the rich results of an execution numbered count,
// linking each PNG image to the artifact its figure was stored as:
// figures/cell-<count>-<n>.png for the n-th PNG image of the execution,
// among the execution's own artifacts. sign, when not nil, gives the link
// a fresh URL; otherwise it keeps the URL the artifact was recorded with.
func fromOutputs(outs []kernel.Output, count int, arts []session.Artifact, sign *urlSigner) []resultView {
	views := make([]resultView, 0, len(outs))
	n := 0
	for _, o := range outs {
		rv := resultView{Kind: o.Kind, Data: o.Data}
		if _, ok := o.Data["image/png"]; ok {
			n++
			name := fmt.Sprintf("figures/cell-%d-%d.png", count, n)
			for _, a := range arts {
				if a.Name != name {
					continue
				}
				av := &artifactView{ID: a.ID, Name: a.Name, Size: a.Size, MIME: a.MIME, SHA256: a.SHA256, URL: a.URL}
				if sign != nil {
					av.URL, av.Expires = sign.sign(a.ID)
				}
				rv.Figure = av
				break
			}
		}
		views = append(views, rv)
	}
	return views
}

// textTypes are the textual MIME types shown as they are, in order of
// preference, when a result has no text/plain.
var textTypes = []string{"text/markdown", "text/latex", "application/json"}

// result prints one rich result: its images as "[image/png, 23.7 KiB]"
// with the artifact that stores the figure and its URL, else its
// text/plain, else its HTML as text, else another textual type, else the
// types it holds and their sizes. Everything is escaped: the sandbox
// wrote it.
func (p *printer) result(r resultView) {
	label := "result:"
	if r.Kind != "execute_result" {
		label = "display:"
	}
	p.printf("  %s\n", p.paint(dim, label))
	var images []string
	for mime := range r.Data {
		if strings.HasPrefix(mime, "image/") {
			images = append(images, mime)
		}
	}
	if len(images) > 0 {
		slices.Sort(images)
		for _, mime := range images {
			size, note := imageSize(mime, r.Data[mime])
			if mime == "image/png" && r.Figure != nil {
				size = r.Figure.Size
			}
			p.printf("    [%s, %s%s]", mime, fmtBytes(size), note)
			if mime == "image/png" && r.Figure != nil {
				p.printf(" %s", r.Figure.Name)
			}
			p.printf("\n")
			if mime == "image/png" && r.Figure != nil && r.Figure.URL != "" {
				note := " (as recorded)" // in a folder's log: there is no secret to sign a fresh one
				if r.Figure.Expires != nil {
					note = " (expires " + fmtTime(*r.Figure.Expires) + ")"
				}
				p.printf("    %s%s\n", r.Figure.URL, p.paint(dim, note))
			}
		}
		return
	}
	if text, ok := r.Data["text/plain"]; ok {
		p.lines(text, "")
		return
	}
	if h, ok := r.Data["text/html"]; ok {
		p.printf("    %s\n", p.paint(dim, "[text/html as text]"))
		p.lines(htmlText(h), "")
		return
	}
	for _, mime := range textTypes {
		if text, ok := r.Data[mime]; ok {
			p.printf("    %s\n", p.paint(dim, "["+mime+"]"))
			p.lines(text, "")
			return
		}
	}
	if len(r.Data) == 0 {
		p.printf("    %s\n", p.paint(dim, "[no data]"))
	}
	for _, mime := range slices.Sorted(maps.Keys(r.Data)) {
		p.printf("    [%s, %s]\n", mime, fmtBytes(int64(len(r.Data[mime]))))
	}
}

// notKept is the note the history keeps instead of an image too large to
// keep (internal/store's capOutputs): the size is that of the base64 text.
var notKept = regexp.MustCompile(`^\[image/[^\]:]+: ([0-9]+) bytes, not kept in history\]$`)

// imageSize returns the size in bytes of an image recorded as data (base64,
// or the note that replaced it), and a note to print after it.
func imageSize(mime, data string) (int64, string) {
	if m := notKept.FindStringSubmatch(data); m != nil {
		n, _ := strconv.ParseInt(m[1], 10, 64)
		return n / 4 * 3, ", not kept in history"
	}
	if mime == "image/svg+xml" {
		return int64(len(data)), ""
	}
	data = strings.TrimRight(strings.TrimSpace(data), "=")
	return int64(base64.RawStdEncoding.DecodedLen(len(data))), ""
}

// htmlTag matches an HTML tag or comment; group 1 is "/" for a closing
// tag, group 2 the tag's name.
var htmlTag = regexp.MustCompile(`(?s)<!--.*?-->|<(/?)([a-zA-Z][a-zA-Z0-9]*)[^>]*>`)

// htmlHidden matches elements whose content is not text to read.
var htmlHidden = regexp.MustCompile(`(?is)<(script|style|head)\b.*?</(script|style|head)\s*>`)

// htmlText returns the text a reader of HTML sees, roughly: tags removed,
// a new line for each block element and line break, cells of a row apart,
// character references decoded, blank lines and trailing spaces dropped.
func htmlText(s string) string {
	const cell = "\x00" // where a cell starts: apart from the one before it
	s = strings.ReplaceAll(s, cell, "")
	s = htmlHidden.ReplaceAllString(s, "")
	s = htmlTag.ReplaceAllStringFunc(s, func(tag string) string {
		m := htmlTag.FindStringSubmatch(tag)
		if m == nil || m[2] == "" {
			return "" // a comment
		}
		switch strings.ToLower(m[2]) {
		case "br", "p", "div", "tr", "li", "table", "thead", "tbody", "ul", "ol", "pre",
			"h1", "h2", "h3", "h4", "h5", "h6", "blockquote", "section", "article":
			return "\n"
		case "td", "th":
			if m[1] == "" {
				return cell
			}
		}
		return ""
	})
	s = html.UnescapeString(s)
	var out []string
	for _, l := range strings.Split(s, "\n") {
		l = strings.TrimRight(strings.ReplaceAll(l, "\u00a0", " "), " \t\r")
		l = strings.ReplaceAll(strings.TrimLeft(l, cell), cell, "  ")
		if strings.TrimSpace(l) == "" {
			continue
		}
		out = append(out, l)
	}
	return strings.Join(out, "\n")
}
