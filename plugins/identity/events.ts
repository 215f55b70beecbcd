import { Type } from 'typebox'
import { defineEvent } from '../../core/index.js'

export const userInvited = defineEvent('user.invited', {
  plugin: 'identity',
  subject: 'user',
  description: 'an administrator invited a user by email',
  payload: Type.Object({ user_id: Type.Integer(), username: Type.String() }),
  audience: () => ({ admins: true }),
})

export const identityEvents = [userInvited]
