package store

import "path/filepath"

// BackupDir is where scheduled backups go: a folder inside the data
// folder, beside FileName, so the temp file and the rename stay on one
// file system.
func BackupDir(dataDir string) string { return filepath.Join(dataDir, "backups") }
