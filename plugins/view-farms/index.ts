import { coreServices, definePlugin } from '../../core/index.js'
import { migrations } from './migrations.js'
import { viewFarmEntities } from './entities.js'
import { viewFarmServices } from './refs.js'
import { ViewFarmService } from './service.js'
import { FarmNode } from './node.js'
import { MANAGE, registerRoutes } from './routes.js'
export { viewFarmServices } from './refs.js'
export { ViewFarmService } from './service.js'
export { ViewFarmNode } from './entities.js'

/** View farms (§4.26): the processes that run jobs, as nodes an administrator can steer. */
export const viewFarmsPlugin = definePlugin({
  name: 'view-farms',
  title: 'View farms',
  version: '1.0.0',
  description: 'The job-running processes as farm nodes: heartbeats, stop/start/restart, concurrency and job types live, pause all, revoke',
  migrations,
  entities: viewFarmEntities,
  capabilities: { [MANAGE]: 'Steer the view farm: stop, start, restart, configure, pause and revoke job-running nodes' },
  register(api) {
    // a node is offline once its heartbeat is older than a job lease (its jobs are retaken then too),
    // and never before five of its beats were missed
    const offlineAfterMs = (beatMs: number) => Math.max(api.config.jobs.leaseMs, 5 * beatMs)
    api.provide(viewFarmServices.farm, (r) => {
      const jobs = r(coreServices.jobs)
      const beatMs = jobs.runner()?.beatMs() ?? 2000
      return new ViewFarmService(r(coreServices.knex), jobs, () => offlineAfterMs(beatMs))
    })
    api.provide(
      viewFarmServices.node,
      (r) => {
        const runner = r(coreServices.jobs).runner()
        if (!runner) throw new Error('this runtime has no job runner')
        const features = r(coreServices.features)
        const version = r(coreServices.plugins).find((p) => p.name === 'core')?.version ?? 'unknown'
        return new FarmNode(r(coreServices.knex), runner, r(coreServices.log).child({ plugin: 'view-farms' }), () => offlineAfterMs(runner.beatMs()), () => features.isActive('view-farms'), version)
      },
      { dispose: (node) => node.close() },
    )
    registerRoutes(api)
  },
  started({ resolve }) {
    // the runner starts after every plugin's started(): the node registers on its first beat
    resolve(viewFarmServices.node).attach()
  },
})
