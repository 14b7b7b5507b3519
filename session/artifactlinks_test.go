package session_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/config"
)

// TestArtifactLinksInsideNotFollowed: a symbolic link to a file or folder
// inside /session/artifacts itself, which a root at the session's folder
// would happily resolve, is reported as a link and not ingested, while the
// files it names are (so ingestion works, and refuses links as links, not
// everything for some other reason). A file ingested before and then
// replaced by a link is reported, not ingested again through the link.
func TestArtifactLinksInsideNotFollowed(t *testing.T) {
	t.Parallel()
	for _, storage := range []config.Storage{config.StorageBind, config.StorageTMPFS} {
		t.Run(string(storage), func(t *testing.T) {
			t.Parallel()
			m := newManager(t, func(c *config.Config) { c.SessionStorage = storage })
			check := func(t *testing.T, code string, wantStored, wantLinks []string) {
				t.Helper()
				res := mustExec(t, m, "links", code)
				if res.Error != nil {
					t.Fatalf("raised: %+v", res.Error)
				}
				var stored []string
				for _, a := range res.Artifacts {
					stored = append(stored, a.Name)
				}
				slices.Sort(stored)
				if !slices.Equal(stored, wantStored) {
					t.Errorf("stored %v, want %v", stored, wantStored)
				}
				var links []string
				for _, s := range res.SkippedArtifacts {
					if !strings.Contains(s.Reason, "symbolic link") {
						t.Errorf("skipped %s: %q, want only links skipped, as links", s.Name, s.Reason)
					}
					links = append(links, s.Name)
				}
				slices.Sort(links)
				if !slices.Equal(links, wantLinks) {
					t.Errorf("skipped as links %v, want %v", links, wantLinks)
				}
			}
			check(t, `
import os
os.chdir('/session/artifacts')
os.makedirs('sub', exist_ok=True)
open('real.csv', 'w').write('a,b\n1,2\n')
open('sub/inner.txt', 'w').write('inner')
os.symlink('real.csv', 'alias.csv')
os.symlink('/session/artifacts/real.csv', 'absolute.csv')
os.symlink('sub/inner.txt', 'sub-alias.txt')
os.symlink('../real.csv', 'sub/up.csv')
os.symlink('sub', 'subdir')`,
				[]string{"real.csv", "sub/inner.txt"},
				[]string{"absolute.csv", "alias.csv", "sub-alias.txt", "sub/up.csv", "subdir"})
			check(t, `
import os
os.chdir('/session/artifacts')
os.remove('real.csv')
os.symlink('sub/inner.txt', 'real.csv')`,
				nil, []string{"real.csv"})
		})
	}
}
