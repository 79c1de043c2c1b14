package ui

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strings"
)

//go:embed static
var staticFS embed.FS

type asset struct {
	body        []byte
	contentType string
}

// assets maps hashed names ("app.3f2a9c01de.css") to their bytes; hashed
// URLs are cached forever and change whenever the file does.
var assets, assetNames = loadAssets()

func loadAssets() (map[string]asset, map[string]string) {
	byHashed, byName := map[string]asset{}, map[string]string{}
	entries, err := fs.ReadDir(staticFS, "static")
	if err != nil {
		panic(err)
	}
	for _, e := range entries {
		b, err := staticFS.ReadFile("static/" + e.Name())
		if err != nil {
			panic(err)
		}
		sum := sha256.Sum256(b)
		ext := path.Ext(e.Name())
		hashed := strings.TrimSuffix(e.Name(), ext) + "." + hex.EncodeToString(sum[:5]) + ext
		ct := mime.TypeByExtension(ext)
		if ext == ".svg" {
			ct = "image/svg+xml"
		}
		byHashed[hashed] = asset{body: b, contentType: ct}
		byName[e.Name()] = "/static/" + hashed
	}
	return byHashed, byName
}

// assetPath returns the hashed URL of a static file.
func assetPath(name string) string {
	if p, ok := assetNames[name]; ok {
		return p
	}
	panic("ui: unknown asset " + name)
}

func (u *UI) static(w http.ResponseWriter, r *http.Request) {
	a, ok := assets[r.PathValue("name")]
	if !ok {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", a.contentType)
	w.Header().Set("Cache-Control", "public, max-age=31536000, immutable")
	_, _ = w.Write(a.body)
}
