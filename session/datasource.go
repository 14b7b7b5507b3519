package session

// CanSelectDatasets reports whether SelectDataset can load anything:
// DATASET_ACCESS is API or HYBRID and a fetcher is configured
// (DATASETS_API_URL or WithFetcher). Otherwise it can only fail with
// ErrNoDatasetSource, and an agent should not be offered it (tools.New
// leaves select_dataset out).
func (m *Manager) CanSelectDatasets() bool {
	return m.cfg.DatasetAccess.UsesAPI() && m.fetcher != nil
}
