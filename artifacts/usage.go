package artifacts

import (
	"context"
	"fmt"
)

// BytesByKeyPrefix returns the bytes the rows of namespace whose session
// key starts with prefix name, summed: what one tenant's artifacts take
// (a tenant's keys share a prefix). Content shared by two rows counts
// twice, as each row is the tenant's to keep. It compares the prefix as
// bytes, never as a LIKE pattern, so a key holding % or _ matches only
// itself.
func (ix *Index) BytesByKeyPrefix(ctx context.Context, namespace, prefix string) (int64, error) {
	var n int64
	err := ix.db.QueryRowContext(ctx, `SELECT COALESCE(SUM(size), 0) FROM artifacts
		WHERE namespace = ? AND substr(session_key, 1, length(?)) = ?`, namespace, prefix, prefix).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("artifact bytes of keys %q: %w", prefix, err)
	}
	return n, nil
}
