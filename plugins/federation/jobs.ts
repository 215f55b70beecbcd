import { coreServices, defineJob, Type, type MamContext } from '../../core/index.js'

/** fetches and verifies the files of a transport receive record, then applies it (bundles are merged) */
export const pullTransportJob = defineJob('federation.pull-transport', Type.Object({ transportId: Type.Integer({ minimum: 1 }) }))

export const pullTransport = {
  job: pullTransportJob,
  enqueue: (ctx: MamContext, transportId: number, userId: number | null) => ctx.resolve(coreServices.jobs).enqueue(pullTransportJob.type, { transportId }, { userId }),
}
