// Package static holds the dashboard's CSS, JavaScript, icon and the vendored htmx,
// embedded in the binary so the appliance works offline. Each file is served
// under a name that carries a hash of its content, so browsers may cache it
// forever and a new build is fetched at once.
package static

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"mime"
	"path"
	"strings"
)

//go:embed app.css app.js htmx.min.js favicon.svg push.js sw.js
var files embed.FS

// Prefix is the URL path every static file is served under.
const Prefix = "/static/"

// File is one embedded file and the name it is served under.
type File struct {
	Name   string // app.css
	Hashed string // app.1a2b3c4d5e.css
	Type   string // its Content-Type
	Body   []byte
}

// set is every file, by plain and by hashed name; built once, never changed.
var set = load()

type fileSet struct {
	byName, byHashed map[string]*File
}

func load() fileSet {
	fs := fileSet{byName: map[string]*File{}, byHashed: map[string]*File{}}
	entries, err := files.ReadDir(".")
	if err != nil {
		panic(err) // the embed directive guarantees the files
	}
	for _, e := range entries {
		body, err := files.ReadFile(e.Name())
		if err != nil {
			panic(err)
		}
		sum := sha256.Sum256(body)
		ext := path.Ext(e.Name())
		f := &File{
			Name:   e.Name(),
			Hashed: strings.TrimSuffix(e.Name(), ext) + "." + hex.EncodeToString(sum[:5]) + ext,
			Type:   mime.TypeByExtension(ext),
			Body:   body,
		}
		if f.Type == "" {
			f.Type = "application/octet-stream"
		}
		fs.byName[f.Name] = f
		fs.byHashed[f.Hashed] = f
	}
	return fs
}

// URL returns the content-hashed URL of an embedded file, e.g.
// "/static/app.1a2b3c4d5e.css". It panics on a name that is not embedded:
// that is a typo in a template, caught by the first render in any test.
func URL(name string) string {
	f, ok := set.byName[name]
	if !ok {
		panic("static: no embedded file " + name)
	}
	return Prefix + f.Hashed
}

// Lookup finds a file by its hashed name.
func Lookup(hashed string) (*File, bool) {
	f, ok := set.byHashed[hashed]
	return f, ok
}
