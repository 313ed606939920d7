package config_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/handoff/handoff/config"
)

func TestLoadSources(t *testing.T) {
	dir := t.TempDir()
	for _, tt := range []struct {
		name, yaml    string
		addr, dataDir config.Source
	}{
		{"both", "addr: 127.0.0.1:9000\ndata_dir: /srv/handoff\n", config.SourceFile, config.SourceFile},
		{"addr only", "addr: 127.0.0.1:9000\n", config.SourceFile, config.SourceDefault},
		{"null values keep the defaults", "addr:\ndata_dir: ~\n", config.SourceDefault, config.SourceDefault},
		{"the default written out is still the file's", "addr: " + config.DefaultAddr + "\n", config.SourceFile, config.SourceDefault},
		{"empty file", "", config.SourceDefault, config.SourceDefault},
	} {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(dir, tt.name+".yaml")
			if err := os.WriteFile(path, []byte(tt.yaml), 0o600); err != nil {
				t.Fatal(err)
			}
			c, got, err := config.LoadSources(path, nil)
			if err != nil {
				t.Fatal(err)
			}
			if got.Addr != tt.addr || got.DataDir != tt.dataDir {
				t.Errorf("sources %+v, want addr %s and data_dir %s", got, tt.addr, tt.dataDir)
			}
			want, err := config.Load(path, nil)
			if err != nil {
				t.Fatal(err)
			}
			if c.Addr != want.Addr || c.DataDir != want.DataDir {
				t.Errorf("LoadSources gave %s and %s, Load %s and %s", c.Addr, c.DataDir, want.Addr, want.DataDir)
			}
		})
	}
	if _, got, err := config.LoadSources("", nil); err != nil || got.Addr != config.SourceDefault || got.DataDir != config.SourceDefault {
		t.Errorf("no file: %+v, %v; want both defaults", got, err)
	}
	if _, _, err := config.LoadSources(filepath.Join(dir, "bad.yaml"), nil); err == nil {
		t.Error("a missing file loaded")
	}
}

func TestOverride(t *testing.T) {
	for _, tt := range []struct {
		name, flag, env, want string
		from, source          config.Source
	}{
		{"the environment wins over the flag", "flag-value", "env-value", "env-value", config.SourceFile, config.SourceEnv},
		{"the flag wins over the file", "flag-value", "", "flag-value", config.SourceFile, config.SourceFlag},
		{"the file stays", "", "", "file-value", config.SourceFile, config.SourceFile},
		{"the default stays", "", "", "file-value", config.SourceDefault, config.SourceDefault},
	} {
		t.Run(tt.name, func(t *testing.T) {
			v := "file-value"
			if got := config.Override(&v, tt.from, tt.flag, tt.env); got != tt.source || v != tt.want {
				t.Errorf("got %q from %s, want %q from %s", v, got, tt.want, tt.source)
			}
		})
	}
}
