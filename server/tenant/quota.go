package tenant

import "strings"

// Group is the quota group of a session key (session.WithQuotaGroup): the
// prefix all of one tenant's keys share, its id and the separator, so a
// tenant's quotas (TENANT_MAX_*) count every session it made through any
// API. A key of no tenant (no separator) is in no group.
func Group(sessionKey string) (string, bool) {
	id, _, ok := strings.Cut(sessionKey, sep)
	if !ok || id == "" {
		return "", false
	}
	return id + sep, true
}
