package sandbox_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/dbtest"
	"github.com/paperclipai/paperclipai/internal/domain"
	"github.com/paperclipai/paperclipai/internal/emulator"
	"github.com/paperclipai/paperclipai/internal/testkit"
)

// skillScript follows the agentmail skill literally: it takes each command
// out of the SKILL.md the run was given and executes it as written (with
// the documented placeholder filled in), through the paperclipai found on
// the run's PATH — no path, no installation step.
const skillScript = `#!/bin/sh
fail() { echo "FAIL: $*"; exit 1; }
SKILL="$PAPERCLIP_SKILLS_DIR/agentmail/SKILL.md"
[ -f "$SKILL" ] || fail "no skill at $SKILL"
command -v paperclipai >/dev/null || fail "paperclipai is not on PATH ($PATH)"
cmd_of() { grep -o "\` + "`" + `paperclipai email $1[^\` + "`" + `]*\` + "`" + `" "$SKILL" | head -1 | tr -d '\` + "`" + `'; }
inboxes=$(cmd_of inboxes); thread=$(cmd_of thread); reply=$(cmd_of "reply --file"); delivery=$(cmd_of delivery)
[ -n "$inboxes" ] && [ -n "$thread" ] && [ -n "$reply" ] && [ -n "$delivery" ] || fail "commands missing from the skill"
eval "$inboxes" > inboxes.json || fail "$inboxes: $(cat inboxes.json)"
eval "$thread" > thread.json || fail "$thread: $(cat thread.json)"
first() { sed -n "s/.*\"$1\": *\"\([^\"]*\)\".*/\1/p" "$2" | head -1; }
endpoint=$(first id inboxes.json); conversation=$(first conversationId thread.json); message=$(first providerMessageId thread.json)
[ -n "$endpoint" ] && [ -n "$conversation" ] && [ -n "$message" ] || fail "ids: $endpoint $conversation $message"
key=$(cat /proc/sys/kernel/random/uuid)
printf '{"endpointId":"%s","conversationId":"%s","replyToMessageId":"%s","replyAll":false,"text":"Thanks, noted.","idempotencyKey":"%s"}' \
  "$endpoint" "$conversation" "$message" "$key" > reply.json
eval "$reply" > sent.json || fail "$reply: $(cat sent.json)"
pub=$(first id sent.json)
eval "$(echo "$delivery" | sed "s/<publicationId>/$pub/")" > delivery.json || fail "$delivery: $(cat delivery.json)"
grep -q '"outcome"' delivery.json || fail "delivery: $(cat delivery.json)"
echo "ran: $inboxes | $thread | $reply | $delivery"
echo "skill commands ok"
`

// TestSkillCommandsWorkVerbatim runs the agentmail skill's commands exactly
// as the skill writes them (`paperclipai email …`), inside a real process
// run on the host and inside a sandboxed run: the server's own binary is
// on every run's PATH as paperclipai.
func TestSkillCommandsWorkVerbatim(t *testing.T) {
	testkit.RequireBwrap(t)
	dbtest.EachURL(t, func(t *testing.T, _ db.Dialect, url string) {
		for _, sandboxed := range []bool{false, true} {
			name := map[bool]string{false: "host", true: "sandbox"}[sandboxed]
			t.Run(name, func(t *testing.T) {
				e := testkit.NewEmailEnv(t, url)
				tools := toolDir(t, skillScript)
				cfg := map[string]any{"command": filepath.Join(tools, "agent.sh"), "timeoutSec": 60}
				patch := map[string]any{"adapterConfig": cfg}
				if sandboxed {
					e.Board.JSON("PATCH", "/api/instance/settings", map[string]any{"experimental": map[string]any{"enableIsolatedWorkspaces": true}}, 200)
					proj := testkit.ID(e.Board.JSON("POST", "/api/companies/"+e.CompanyID+"/projects", map[string]any{"name": "Mail"}, 201))
					patch["environmentId"] = testkit.ID(e.Board.JSON("POST", "/api/companies/"+e.CompanyID+"/environments",
						map[string]any{"name": "Sandbox", "driver": "sandbox"}, 201))
					patch["permissions"] = map[string]any{"trustPreset": "low_trust_review",
						"authorizationPolicy": map[string]any{"trustBoundary": map[string]any{"projectIds": []string{proj}}}}
				}
				e.Board.JSON("PATCH", "/api/agents/"+e.AgentID, patch, 200)
				sum := e.Setup("verbatim-"+name, nil)
				epID, address := sum["id"].(string), sum["address"].(string)
				task := deliverTask(t, e, epID, address, emulator.DeliverRequest{From: "Jane <jane@example.com>", Subject: "Hello",
					Text: "Please confirm."})
				run := finishedRun(t, e, task.ID, 1)
				log := runLog(t, e, run)
				if run.Status != domain.RunSucceeded || !strings.Contains(log, "skill commands ok") {
					t.Fatalf("%s run %s (%s): %s", name, run.Status, run.Error, log)
				}
				if !strings.Contains(log, "ran: paperclipai email inboxes | paperclipai email thread \"$PAPERCLIP_TASK_ID\" | paperclipai email reply --file reply.json") {
					t.Fatalf("the run did not use the skill's commands: %s", log)
				}
			})
		}
	})
}
