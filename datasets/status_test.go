package datasets_test

import (
	"errors"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/agentbox/agentbox/datasets"
	"github.com/agentbox/agentbox/internal/store"
)

func TestStatuses(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "agentbox.db")
	s, err := store.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	st := datasets.NewStatuses(s)
	now := time.Date(2025, 1, 2, 3, 4, 5, 6, time.UTC)

	pending := datasets.Record{Namespace: "team", SessionID: "s1", DatasetID: "b.parquet",
		Name: "b.parquet", Status: datasets.StatusPending, Updated: now}
	if err := st.Set(ctx, pending); err != nil {
		t.Fatal(err)
	}
	failed := datasets.Record{Namespace: "team", SessionID: "s1", DatasetID: "../a",
		Name: "a-0123456789", Status: datasets.StatusFailed, Reason: `fetch dataset "../a": HTTP 404: not found`, Updated: now}
	if err := st.Set(ctx, failed); err != nil {
		t.Fatal(err)
	}
	// Another session and namespace stay apart.
	for _, r := range []datasets.Record{
		{Namespace: "team", SessionID: "s2", DatasetID: "b.parquet", Status: datasets.StatusPending},
		{Namespace: "other", SessionID: "s1", DatasetID: "b.parquet", Status: datasets.StatusPending},
	} {
		if err := st.Set(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	loaded := pending
	loaded.Status, loaded.SHA256, loaded.Size, loaded.Updated = datasets.StatusLoaded, "ab12", 1234, now.Add(time.Second)
	if err := st.Set(ctx, loaded); err != nil {
		t.Fatal(err)
	}

	// The statuses survive a restart.
	s.Close()
	if s, err = store.Open(ctx, path); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	st = datasets.NewStatuses(s)

	got, err := st.Get(ctx, "team", "s1", "b.parquet")
	if err != nil || !reflect.DeepEqual(got, loaded) {
		t.Errorf("Get = %+v, %v; want %+v", got, err, loaded)
	}
	list, err := st.List(ctx, "team", "s1")
	if err != nil || !reflect.DeepEqual(list, []datasets.Record{failed, loaded}) {
		t.Errorf("List = %+v, %v", list, err)
	}
	if _, err := st.Get(ctx, "team", "s1", "nope"); !errors.Is(err, datasets.ErrNotFound) {
		t.Errorf("Get of an unknown dataset: %v, want ErrNotFound", err)
	}
	if list, err := st.List(ctx, "team", "nobody"); err != nil || list == nil || len(list) != 0 {
		t.Errorf("List of an unknown session = %#v, %v; want empty", list, err)
	}
	if n, err := st.DeleteSession(ctx, "team", "s1"); n != 2 || err != nil {
		t.Errorf("DeleteSession = %d, %v; want 2", n, err)
	}
	if list, _ := st.List(ctx, "team", "s2"); len(list) != 1 || list[0].Updated.IsZero() {
		t.Errorf("other session after DeleteSession: %+v; want one row with Updated set", list)
	}
}

func TestStatusesInvalid(t *testing.T) {
	st := datasets.NewStatuses(newEnv(t).store)
	for _, r := range []datasets.Record{
		{SessionID: "s", DatasetID: "d", Status: "DONE"},
		{SessionID: "s", DatasetID: "d"},
		{DatasetID: "d", Status: datasets.StatusLoaded},
		{SessionID: "s", Status: datasets.StatusLoaded},
	} {
		if err := st.Set(t.Context(), r); err == nil {
			t.Errorf("Set(%+v) succeeded", r)
		}
	}
}
