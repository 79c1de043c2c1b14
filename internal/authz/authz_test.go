package authz_test

import (
	"context"
	"errors"
	"testing"

	"github.com/paperclipai/paperclipai/internal/authz"
	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/dbtest"
	"github.com/paperclipai/paperclipai/internal/domain"
	"github.com/paperclipai/paperclipai/internal/store"
)

// The rules that need no database: who is an instance administrator, role
// and permission checks, the board-only gate.
func TestPureRules(t *testing.T) {
	agent := &domain.Agent{ID: "agent-1"}
	for _, tc := range []struct {
		name      string
		a         authz.Actor
		board     bool
		instAdmin bool
		auditKind string
		auditID   string
	}{
		{"local board", authz.Actor{Kind: authz.KindBoard, LocalBoard: true}, true, true, "board", ""},
		{"instance admin", authz.Actor{Kind: authz.KindBoard, UserID: "u1", IsInstanceAdmin: true}, true, true, "board", "u1"},
		{"instance admin with a company key is not one", authz.Actor{Kind: authz.KindBoard, UserID: "u1", IsInstanceAdmin: true, KeyCompanyID: "c1"}, true, false, "board", "u1"},
		{"local board with a company key is not one", authz.Actor{Kind: authz.KindBoard, LocalBoard: true, KeyCompanyID: "c1"}, true, false, "board", ""},
		{"a member", authz.Actor{Kind: authz.KindBoard, UserID: "u2"}, true, false, "board", "u2"},
		{"an agent", authz.Actor{Kind: authz.KindAgent, Agent: agent, IsInstanceAdmin: true, LocalBoard: true}, false, false, "agent", "agent-1"},
		{"nobody (a background worker)", authz.Actor{}, false, false, "system", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := authz.RequireBoard(tc.a); (err == nil) != tc.board {
				t.Errorf("RequireBoard = %v, want allowed %v", err, tc.board)
			} else if err != nil && !errors.Is(err, authz.ErrForbidden) {
				t.Errorf("RequireBoard refused with %v, want ErrForbidden", err)
			}
			if err := authz.RequireInstanceAdmin(tc.a); (err == nil) != tc.instAdmin {
				t.Errorf("RequireInstanceAdmin = %v, want allowed %v", err, tc.instAdmin)
			}
			got := tc.a.AuditActor()
			if got.Kind != tc.auditKind || got.ID != tc.auditID {
				t.Errorf("AuditActor = %+v, want kind %q id %q", got, tc.auditKind, tc.auditID)
			}
		})
	}

	for _, tc := range []struct {
		role  string
		perms []string
		perm  string
		want  bool
	}{
		{domain.RoleOwner, nil, "agents:create", true},
		{domain.RoleAdmin, nil, "agents:create", true},
		{domain.RoleMember, nil, "agents:create", false},
		{domain.RoleMember, []string{"agents:create"}, "agents:create", true},
		{domain.RoleViewer, []string{"other"}, "agents:create", false},
		{"agent", nil, "agents:create", false},
	} {
		acc := authz.Access{Role: tc.role, Permissions: tc.perms}
		if got := authz.HasPermission(acc, tc.perm); got != tc.want {
			t.Errorf("HasPermission(%s %v, %s) = %v, want %v", tc.role, tc.perms, tc.perm, got, tc.want)
		}
	}
	if err := authz.RequireRole(authz.Access{Role: domain.RoleMember}, domain.RoleOwner, domain.RoleAdmin); !errors.Is(err, authz.ErrForbidden) {
		t.Errorf("a member passed an owner/admin check: %v", err)
	}
	if err := authz.RequireRole(authz.Access{Role: domain.RoleAdmin}, domain.RoleOwner, domain.RoleAdmin); err != nil {
		t.Errorf("an admin failed an owner/admin check: %v", err)
	}
	if err := authz.RequireRole(authz.Access{}, domain.RoleOwner); err == nil {
		t.Error("an empty role passed a role check")
	}
}

// The rules that read the company, memberships and task tree, as one table
// per rule, on both databases.
func TestCompanyAndTaskRules(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d *db.DB) {
		ctx := context.Background()
		st := store.New(d)
		svc := &authz.Service{Store: st}
		must := func(err error) {
			t.Helper()
			if err != nil {
				t.Fatal(err)
			}
		}
		user := func(email string) string {
			u, err := st.EnsureUser(ctx, d, email, email, false)
			must(err)
			return u.ID
		}
		owner, member, viewer, stranger := user("owner@x.test"), user("member@x.test"), user("viewer@x.test"), user("stranger@x.test")
		co, err := st.CreateCompany(ctx, d, "Rules Co", owner)
		must(err)
		other, err := st.CreateCompany(ctx, d, "Other Co", stranger)
		must(err)
		_, err = st.PutMembership(ctx, d, co.ID, member, domain.RoleMember, nil)
		must(err)
		_, err = st.PutMembership(ctx, d, co.ID, viewer, domain.RoleViewer, nil)
		must(err)

		proj := domain.Project{CompanyID: co.ID, Name: "inside"}
		must(st.CreateProject(ctx, d, &proj))
		standard := domain.Agent{CompanyID: co.ID, Name: "standard", AdapterType: "process"}
		must(st.CreateAgent(ctx, d, &standard))
		root := domain.Issue{CompanyID: co.ID, Title: "root"}
		_, err = st.CreateIssue(ctx, d, &root)
		must(err)
		child := domain.Issue{CompanyID: co.ID, Title: "child", ParentID: root.ID}
		_, err = st.CreateIssue(ctx, d, &child)
		must(err)
		inProject := domain.Issue{CompanyID: co.ID, Title: "in project", ProjectID: proj.ID}
		_, err = st.CreateIssue(ctx, d, &inProject)
		must(err)
		outside := domain.Issue{CompanyID: co.ID, Title: "outside"}
		_, err = st.CreateIssue(ctx, d, &outside)
		must(err)
		lowRoot := domain.Agent{CompanyID: co.ID, Name: "low-root", AdapterType: "process", Permissions: domain.AgentPermissions{
			TrustPreset: domain.TrustLowTrustReview,
			AuthorizationPolicy: &domain.AuthorizationPolicy{TrustBoundary: &domain.TrustBoundary{
				CompanyID: co.ID, RootIssueID: root.ID}}}}
		must(st.CreateAgent(ctx, d, &lowRoot))
		lowProject := domain.Agent{CompanyID: co.ID, Name: "low-project", AdapterType: "process", Permissions: domain.AgentPermissions{
			TrustPreset: domain.TrustLowTrustReview,
			AuthorizationPolicy: &domain.AuthorizationPolicy{TrustBoundary: &domain.TrustBoundary{
				CompanyID: co.ID, ProjectIDs: []string{proj.ID}}}}}
		must(st.CreateAgent(ctx, d, &lowProject))
		assigned := domain.Issue{CompanyID: co.ID, Title: "assigned to low-project", AssigneeAgentID: lowProject.ID}
		_, err = st.CreateIssue(ctx, d, &assigned)
		must(err)

		board := func(id string) authz.Actor { return authz.Actor{Kind: authz.KindBoard, UserID: id} }
		agentActor := func(a *domain.Agent, header bool) authz.Actor {
			return authz.Actor{Kind: authz.KindAgent, Agent: a, Run: &domain.Run{ID: "run-1"}, RunHeaderMatches: header}
		}
		isNotFound := func(err error) bool { return errors.Is(err, store.ErrNotFound) }
		isForbidden := func(err error) bool { return errors.Is(err, authz.ErrForbidden) }

		t.Run("CompanyAccess", func(t *testing.T) {
			for _, tc := range []struct {
				name    string
				a       authz.Actor
				company string
				write   bool
				want    func(error) bool // nil: allowed
				role    string
			}{
				{"owner writes", board(owner), co.ID, true, nil, domain.RoleOwner},
				{"member writes", board(member), co.ID, true, nil, domain.RoleMember},
				{"viewer reads", board(viewer), co.ID, false, nil, domain.RoleViewer},
				{"viewer never writes", board(viewer), co.ID, true, isForbidden, ""},
				{"a stranger sees not found, not forbidden", board(stranger), co.ID, false, isNotFound, ""},
				{"a member of another company sees not found", board(member), other.ID, false, isNotFound, ""},
				{"a company key for another company", authz.Actor{Kind: authz.KindBoard, UserID: owner, KeyCompanyID: other.ID}, co.ID, false, isNotFound, ""},
				{"the local board is owner everywhere", authz.Actor{Kind: authz.KindBoard, LocalBoard: true}, other.ID, true, nil, domain.RoleOwner},
				{"an instance admin is owner everywhere", authz.Actor{Kind: authz.KindBoard, UserID: stranger, IsInstanceAdmin: true}, co.ID, true, nil, domain.RoleOwner},
				{"an unknown company", authz.Actor{Kind: authz.KindBoard, LocalBoard: true}, store.NewID(), false, isNotFound, ""},
				{"an agent reads its company", agentActor(&standard, false), co.ID, false, nil, "agent"},
				{"an agent writes only with its run header", agentActor(&standard, false), co.ID, true, isForbidden, ""},
				{"an agent writes with its run header", agentActor(&standard, true), co.ID, true, nil, "agent"},
				{"an agent never sees another company", agentActor(&standard, true), other.ID, false, isNotFound, ""},
				{"no actor", authz.Actor{}, co.ID, false, func(err error) bool { return errors.Is(err, authz.ErrUnauthenticated) }, ""},
			} {
				t.Run(tc.name, func(t *testing.T) {
					acc, err := svc.CompanyAccess(ctx, d, tc.a, tc.company, tc.write)
					switch {
					case tc.want == nil && err != nil:
						t.Fatalf("refused: %v", err)
					case tc.want == nil && acc.Role != tc.role:
						t.Fatalf("role %q, want %q", acc.Role, tc.role)
					case tc.want != nil && !tc.want(err):
						t.Fatalf("got %v (access %+v), want a refusal of the other kind", err, acc)
					}
				})
			}
		})

		t.Run("CanReadIssue and CanWriteIssue", func(t *testing.T) {
			for _, tc := range []struct {
				name  string
				a     authz.Actor
				issue domain.Issue
				read  func(error) bool
				write func(error) bool
			}{
				{"a member reads and writes any task", board(member), outside, nil, nil},
				{"a viewer reads but never writes", board(viewer), outside, nil, isForbidden},
				{"a stranger sees not found", board(stranger), outside, isNotFound, isNotFound},
				{"a standard agent reads any task, writes none it is not assigned", agentActor(&standard, true), outside, nil, isForbidden},
				{"a low-trust agent reads the root of its boundary", agentActor(&lowRoot, true), root, nil, isForbidden},
				{"a low-trust agent reads a descendant of its root", agentActor(&lowRoot, true), child, nil, isForbidden},
				{"a low-trust agent never reads outside its root", agentActor(&lowRoot, true), outside, isForbidden, isForbidden},
				{"a project boundary reads the project's tasks", agentActor(&lowProject, true), inProject, nil, isForbidden},
				{"a project boundary never reads other tasks", agentActor(&lowProject, true), outside, isForbidden, isForbidden},
				{"a low-trust agent reads and writes its own task", agentActor(&lowProject, true), assigned, nil, nil},
				{"its own task still needs the run header to write", agentActor(&lowProject, false), assigned, nil, isForbidden},
			} {
				t.Run(tc.name, func(t *testing.T) {
					for _, step := range []struct {
						what string
						err  error
						want func(error) bool
					}{
						{"read", svc.CanReadIssue(ctx, d, tc.a, tc.issue), tc.read},
						{"write", svc.CanWriteIssue(ctx, d, tc.a, tc.issue), tc.write},
					} {
						if step.want == nil && step.err != nil {
							t.Errorf("%s refused: %v", step.what, step.err)
						} else if step.want != nil && !step.want(step.err) {
							t.Errorf("%s: got %v, want a refusal of the other kind", step.what, step.err)
						}
					}
				})
			}
		})
	})
}
