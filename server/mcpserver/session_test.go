package mcpserver

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentbox/agentbox/kernel"
	"github.com/agentbox/agentbox/server/tenant"
	"github.com/agentbox/agentbox/session"
)

// TestSessionName: where a call's session comes from, what the tool is
// left with, and the names that are refused.
func TestSessionName(t *testing.T) {
	cases := []struct {
		name      string
		args      string
		header    string
		wantName  string
		wantInput string // "" when a problem is expected
		problem   string // substring
	}{
		{"argument", `{"code":"1","session":"s1"}`, "", "s1", `{"code":"1"}`, ""},
		{"argument beats header", `{"code":"1","session":"s1"}`, "h", "s1", `{"code":"1"}`, ""},
		{"header", `{"code":"1"}`, "thread-9", "thread-9", `{"code":"1"}`, ""},
		{"null argument: header", `{"code":"1","session":null}`, "h", "h", `{"code":"1"}`, ""},
		{"empty argument: default", `{"code":"1","session":""}`, "", DefaultSession, `{"code":"1"}`, ""},
		{"nothing: default", `{"code":"1"}`, "", DefaultSession, `{"code":"1"}`, ""},
		{"no arguments", ``, "", DefaultSession, `{}`, ""},
		{"null arguments", `null`, "", DefaultSession, `{}`, ""},
		{"not an object: passed on", `[1]`, "", DefaultSession, `[1]`, ""},
		{"unicode name", `{"session":"café ☕"}`, "", "café ☕", `{}`, ""},
		{"number", `{"session":3}`, "", "", "", `"session" must be a string`},
		{"object", `{"session":{"id":"x"}}`, "", "", "", `"session" must be a string`},
		{"control character", `{"session":"a\u0007"}`, "", "", "", "unprintable"},
		{"too long", `{"session":"` + strings.Repeat("x", maxSessionName+1) + `"}`, "", "", "", "at most 512"},
		{"longest", `{"session":"` + strings.Repeat("x", maxSessionName) + `"}`, "", strings.Repeat("x", maxSessionName), `{}`, ""},
		{"bad header", `{}`, "a\tb", "", "", "X-Agentbox-Session header holds the unprintable"},
		{"header not UTF-8", `{}`, "\xff", "", "", "not UTF-8"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req := &mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{Name: "run_python", Arguments: json.RawMessage(tc.args)}}
			if tc.header != "" {
				req.Extra = &mcp.RequestExtra{Header: http.Header{SessionHeader: {tc.header}}}
			}
			input, name, problem := sessionName(req)
			if tc.problem != "" {
				if !strings.Contains(problem, tc.problem) {
					t.Errorf("problem %q, want one with %q", problem, tc.problem)
				}
				return
			}
			if problem != "" {
				t.Fatalf("problem %q", problem)
			}
			if name != tc.wantName || string(input) != tc.wantInput {
				t.Errorf("name %q input %s, want %q %s", name, input, tc.wantName, tc.wantInput)
			}
		})
	}
}

// TestCallerTenant: no token is tenant.Local; HTTPHandler's token carries
// its tenant; a token from someone else's authentication is refused rather
// than guessed at.
func TestCallerTenant(t *testing.T) {
	a := tenant.Tenant{ID: "tabc"}
	cases := []struct {
		name  string
		extra *mcp.RequestExtra
		want  tenant.Tenant
		err   bool
	}{
		{"no extra", nil, tenant.Local, false},
		{"no token", &mcp.RequestExtra{Header: http.Header{}}, tenant.Local, false},
		{"our token", &mcp.RequestExtra{TokenInfo: &auth.TokenInfo{UserID: a.ID, Extra: map[string]any{tenantExtra: a}}}, a, false},
		{"foreign token", &mcp.RequestExtra{TokenInfo: &auth.TokenInfo{UserID: "someone"}}, tenant.Tenant{}, true},
		{"empty tenant", &mcp.RequestExtra{TokenInfo: &auth.TokenInfo{Extra: map[string]any{tenantExtra: tenant.Tenant{}}}}, tenant.Tenant{}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := callerTenant(&mcp.CallToolRequest{Extra: tc.extra})
			if (err != nil) != tc.err || got != tc.want {
				t.Errorf("got %v, %v; want %v, error %v", got, err, tc.want, tc.err)
			}
		})
	}
}

// TestImages: one image per output (PNG preferred), SVG and text left out,
// the budget kept, and data that is not base64 noted, not passed on.
func TestImages(t *testing.T) {
	png := []byte("\x89PNG\r\n\x1a\nfigure")
	b64 := func(b []byte) string { return base64.StdEncoding.EncodeToString(b) }
	big := make([]byte, 100)
	r := &session.Result{Outputs: []kernel.Output{
		{Kind: "execute_result", Data: map[string]string{"text/plain": "42"}},
		{Kind: "display_data", Data: map[string]string{"image/jpeg": b64([]byte("jpeg")), "image/png": b64(png)}},
		{Kind: "display_data", Data: map[string]string{"image/svg+xml": "<svg/>"}},
		{Kind: "display_data", Data: map[string]string{"image/png": "not base64!"}},
		{Kind: "display_data", Data: map[string]string{"image/png": b64(big)}},
		{Kind: "display_data", Data: map[string]string{"image/gif": b64([]byte("gif"))}},
	}}
	out := images(r, 50)
	var got []string
	for _, c := range out {
		switch c := c.(type) {
		case *mcp.ImageContent:
			got = append(got, c.MIMEType+":"+string(c.Data))
		case *mcp.TextContent:
			got = append(got, c.Text)
		}
	}
	want := []string{
		"image/png:" + string(png),
		"image/gif:gif",
		"[1 image not shown: too large for one reply; figures are saved as artifacts, see their URLs]",
		"[1 image not shown: not valid base64 data]",
	}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("images:\n%q\nwant\n%q", got, want)
	}
	if out := images(&session.Result{}, 50); len(out) != 0 {
		t.Errorf("no outputs: %v", out)
	}
}

// TestNoArgs: session_info and reset_session take nothing but the session.
func TestNoArgs(t *testing.T) {
	for in, want := range map[string]string{
		`{}`:           "",
		`{"x":1}`:      `unknown field "x"`,
		`[]`:           "must be a JSON object",
		`"s"`:          "must be a JSON object",
		`{"a":1,"b"`:   "must be a JSON object",
		`{"\u0000":1}`: `unknown field "\x00"`,
	} {
		got := noArgs(json.RawMessage(in))
		if want == "" && got != "" || !strings.Contains(got, want) {
			t.Errorf("noArgs(%s) = %q, want %q", in, got, want)
		}
	}
}
