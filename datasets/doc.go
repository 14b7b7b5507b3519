// Package datasets brings datasets to sessions and describes them. It is the
// pure-Go half of dataset access (config.DatasetAccess); the session manager
// copies files into containers.
//
// Sources. A Fetcher returns a dataset's bytes for a Request: the id, and
// the namespace and session key that ask (to authorize by). FetcherFunc and
// BytesFetcher adapt functions, HTTPFetcher gets a URL with a bearer token
// and the session in headers. Ids come from a model and are untrusted:
// SafeName derives the file name under /session/data that a dataset is
// staged as, one that never leaves that folder.
//
// Cache. A Cache keeps fetched datasets in the artifacts Blobstore, indexed
// by scope and id in the agentbox database (table dataset_cache), so a
// dataset is fetched once for all the sessions of its Scope (every session,
// a namespace's, or one key's), and concurrent Gets of one id share one
// fetch; Request.Refresh and Forget fetch a changed dataset again. Statuses
// records, per session, each selected dataset's PENDING,
// LOADED or FAILED status and reason (table dataset_status), which survives
// restarts.
//
// Listing. Describe and DescribeDir tell an agent what the files are
// without reading row data: size, format, a Parquet file's row count, row
// groups and schema (from the footer alone) and a CSV file's header.
// Info.Summary puts that on one line for a prompt.
//
// Lifecycle: NewCache and NewStatuses do no I/O; both are safe for
// concurrent use, also by other processes sharing the database and
// blobstore. Cache.Close cancels fetches in flight and waits for them.
//
// Context policy: calls that wait take a context first. A Cache fetch runs
// apart from the callers waiting for it and is cancelled when the last of
// them gives up (or at Close), so one impatient caller does not fail the
// others. Nothing keeps a context after its call returns.
package datasets
