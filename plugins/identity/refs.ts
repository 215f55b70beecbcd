import { createServiceRef } from '../../core/index.js'
import type { AccessRightService } from './access-rights.js'
import type { TeamService } from './teams-service.js'
import type { Mailer } from './mailer.js'
import type { UserLimits } from './user-limits.js'

/** The identity plugin's services, for plugins that list `identity` in their dependsOn. */
export const identityServices = {
  /** team rights on projects, galleries, sequences …: checks, list scoping, grants */
  accessRights: createServiceRef<AccessRightService>('identity.accessRights'),
  teams: createServiceRef<TeamService>('identity.teams'),
  /** outgoing mail over the configured SMTP server (503 when none is configured) */
  mailer: createServiceRef<Mailer>('identity.mailer'),
  /** limits on the number of accounts (the license's max_users), checked where users are created */
  userLimits: createServiceRef<UserLimits>('identity.userLimits'),
} as const
