// perms.js: what a signed-in user may do, from GET /api/v1/whoami, mirroring the
// server's roles (docs/api.md, Roles). The portal hides what the role may not do;
// the server still decides, and its refusal is shown when it comes.

export function canSubmit(me) {
  return me.role === 'admin' || me.role === 'lead' || me.role === 'member';
}

export function canCancel(me, job) {
  return me.role === 'admin' || ((me.role === 'lead' || me.role === 'member') && job.team === me.team);
}

// Change a job's priority and its place among its team's jobs.
export function canPrioritize(me, team) {
  return me.role === 'admin' || (me.role === 'lead' && team === me.team);
}

// The teams whose jobs the user works with: a lead's or member's own; null: all.
export function ownTeam(me) {
  return me.role === 'lead' || me.role === 'member' ? me.team : null;
}

// The classes the role may submit at (the server refuses the others with 403).
export function priorities(me) {
  if (me.role === 'admin') return ['production', 'high', 'normal', 'low'];
  return me.role === 'lead' ? ['high', 'normal', 'low'] : ['normal', 'low'];
}

// Make, list and revoke API tokens (the Tokens page).
export function canManageTokens(me) {
  return me.role === 'admin';
}
