package email

import (
	"path/filepath"
	"testing"

	"github.com/paperclipai/paperclipai/internal/golden"
)

// The agents' skill file is read by agent runtimes: its text, the shape of
// the assigned-inbox data and the revision marker change only on purpose.
func TestSkillGolden(t *testing.T) {
	got := renderSkill([]SkillResource{
		{ID: "0b1f2a3c-4d5e-4f60-8a9b-0c1d2e3f4a5b", Label: "support@agentmail.to", Address: "support@agentmail.to"},
		{ID: "1c2d3e4f-5a6b-4c7d-8e9f-a0b1c2d3e4f5", Label: "sales@example.com", Address: "sales@example.com"},
	})
	golden.Check(t, filepath.Join("testdata", "skill.golden.md"), []byte(got))
}
