package web

import "github.com/handoff/handoff/password"

// passwordRule is the rule a new password of a person meets: zxcvbn's
// score for their role, and none built on the product's name, the
// clients' ids and names or the person's own name and owner.
func (s *Server) passwordRule(admin bool, name, owner string) password.Rule {
	words := []string{name, owner}
	for _, cl := range s.cfg.ClientList() {
		words = append(words, cl.ID, cl.Name)
	}
	return password.RuleFor(admin, words...)
}
