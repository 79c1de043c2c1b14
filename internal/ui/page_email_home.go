package ui

// Email is the home of everything about a company's mail: the
// conversation list, and under it the address (inbox) pages and the
// quarantine. Their sidebar item is Email and their breadcrumbs start at
// it; the AgentMail app page keeps the connections and the setup wizard.

// emailNav is the sidebar key of the Email item.
const emailNav = "email"

// emailCrumbs returns the breadcrumbs of a page under Email.
func (c *rc) emailCrumbs(rest ...crumb) []crumb {
	return append([]crumb{{"Email", "/c/" + c.cid + "/email"}}, rest...)
}
