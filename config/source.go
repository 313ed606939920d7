package config

import (
	"bytes"
	"fmt"
	"os"

	"go.yaml.in/yaml/v3"
)

// Source is where serve took a setting from, for the start log.
type Source string

// The sources of addr and data_dir, strongest first: the environment wins
// over the command line (a container sets HANDOFF_DATA once for every
// command), the command line over the file, the file over the default.
const (
	SourceEnv     Source = "env"
	SourceFlag    Source = "flag"
	SourceFile    Source = "file"
	SourceDefault Source = "default"
)

// Sources says which of addr and data_dir the configuration file set.
type Sources struct {
	Addr, DataDir Source // SourceFile or SourceDefault
}

// LoadSources is Load that also reports whether the file set addr and
// data_dir, so that serve can log which source won. The file is read once.
func LoadSources(path string, getenv func(string) string) (*Config, Sources, error) {
	src := Sources{Addr: SourceDefault, DataDir: SourceDefault}
	if path == "" {
		return Default(), src, nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, src, fmt.Errorf("config: %w", err)
	}
	c, err := Parse(data, getenv)
	if err != nil {
		return nil, src, err
	}
	// Parse accepted the file, so it is one YAML document; a top-level key
	// with a null value leaves the default, as Parse does.
	var doc yaml.Node
	if yaml.NewDecoder(bytes.NewReader(data)).Decode(&doc) == nil {
		if root := resolve(documentRoot(&doc)); root.Kind == yaml.MappingNode {
			for i := 0; i+1 < len(root.Content); i += 2 {
				if isNull(resolve(root.Content[i+1])) {
					continue
				}
				switch root.Content[i].Value {
				case "addr":
					src.Addr = SourceFile
				case "data_dir":
					src.DataDir = SourceFile
				}
			}
		}
	}
	return c, src, nil
}

// Override applies the environment variable's value env and the flag's
// value flag to *dst, which holds the file's value or the default (from,
// as LoadSources reported it), and returns the source that won.
func Override(dst *string, from Source, flag, env string) Source {
	switch {
	case env != "":
		*dst = env
		return SourceEnv
	case flag != "":
		*dst = flag
		return SourceFlag
	}
	return from
}
