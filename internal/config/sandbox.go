package config

import "path/filepath"

// SandboxHidden lists the parts of the Paperclip home a sandboxed run must
// never see (its instance directory: database, vault key, run scratch; and
// the master key file wherever it is), and so that no sandbox may bind.
func (c Config) SandboxHidden() []string {
	return []string{filepath.Join(c.Home, "instance"), c.MasterKeyFile}
}
