import path from 'node:path'
import { gzipSync } from 'node:zlib'
import JSZip from 'jszip'

/** the shared editing-suite fixtures, beside the checkout (as the markers tests find them) */
export const NLE = path.resolve(process.cwd(), '../shared/fixtures/nle')

/**
 * A hand-made Premiere Pro project, shaped like a saved `.prproj` (checked against a CC0 project
 * saved by Premiere): a flat `PremiereData` list of objects linked by `ObjectRef`/`ObjectURef`.
 * The root bin holds two clips, one offline clip, a Black Video generator and a sequence; one
 * `Media` object is left over from a deleted clip and reachable from nothing.
 */
export function premiereXml(options: { sequence?: string; extraSequence?: string } = {}) {
  const clip = (uid: string, master: string, name: string) => `
	<ClipProjectItem ObjectUID="${uid}" ClassID="cb4e0ed7-aca1-4c8a-9c0e-5e2f1b3c4d5e" Version="1">
		<ProjectItem Version="1"><Node Version="1"><Properties Version="1"/></Node><Name>${name}</Name></ProjectItem>
		<MasterClip ObjectURef="${master}"/>
	</ClipProjectItem>`
  const master = (uid: string, source: number, name: string) => `
	<MasterClip ObjectUID="${uid}" ClassID="fb11c33a-b0a4-4a6b-8a4a-0f1e2d3c4b5a" Version="11">
		<Clips Version="1"><Clip Index="0" ObjectRef="${source}"/></Clips>
		<Name>${name}</Name>
	</MasterClip>`
  const source = (id: number, media: string) => `
	<VideoMediaSource ObjectID="${id}" ClassID="e64ddf74-8fac-4682-8aa8-0e0ca2248949" Version="2">
		<MediaSource Version="4"><Media ObjectURef="${media}"/></MediaSource>
	</VideoMediaSource>`
  const media = (uid: string, file: string, relative: string | null, title: string) => `
	<Media ObjectUID="${uid}" ClassID="7a5c103e-f3ac-4391-b6b4-7cc3d2f9a7ff" Version="27">
		<VideoStream ObjectRef="900"/>
		${relative ? `<RelativePath>${relative}</RelativePath>` : ''}
		<FilePath>${file}</FilePath>
		<ImplementationID>1fa18bfa-255c-44b1-ad73-56bcd99fceaf</ImplementationID>
		<Title>${title}</Title>
		<ActualMediaFilePath>${file}</ActualMediaFilePath>
	</Media>`
  const sequence = (uid: string, name: string) => `
	<Sequence ObjectUID="${uid}" ClassID="6a15d903-8739-11d5-af2d-9b7855ad8974" Version="11">
		<Node Version="1"><Properties Version="1"><MZ.EditLine>0</MZ.EditLine><MZ.Sequence.PreviewFrameSizeHeight>1080</MZ.Sequence.PreviewFrameSizeHeight></Properties></Node>
		<TrackGroups Version="1"><TrackGroup Version="1" Index="0"><First>228cda18-3625-4d2d-951e-348879e4ed93</First><Second ObjectRef="20"/></TrackGroup></TrackGroups>
		<ID>2</ID>
		<Name>${name}</Name>
	</Sequence>`
  const items = ['c-a001', 'c-b002', 'c-missing', 'c-black', 'c-seq', ...(options.extraSequence ? ['c-seq2'] : [])]
  return `<?xml version="1.0" encoding="UTF-8" ?>
<PremiereData Version="3">
	<Project ObjectRef="1"/>
	<Project ObjectID="1" ClassID="62ad66dd-0dcd-42da-a660-6d8fbde94876" Version="38">
		<Node Version="1"><Properties Version="1"><MZ.BuildVersion.Created>24.1.0x63</MZ.BuildVersion.Created><MZ.Prefs.Export.LastExportedPreset>&lt;PremiereData Version="3"&gt;&lt;Media ObjectUID="fake"/&gt;&lt;/PremiereData&gt;</MZ.Prefs.Export.LastExportedPreset></Properties></Node>
		<RootProjectItem ObjectURef="root-bin"/>
	</Project>
	<RootProjectItem ObjectUID="root-bin" ClassID="1c307a89-9318-47d7-a583-bf2553736543" Version="1">
		<ProjectItem Version="1"><Name>Root Bin</Name></ProjectItem>
		<ProjectItemContainer Version="1"><Items Version="1">
${items.map((uid, i) => `			<Item Index="${i}" ObjectURef="${uid}"/>`).join('\n')}
		</Items></ProjectItemContainer>
	</RootProjectItem>
${clip('c-a001', 'm-a001', 'A001.mov')}
${clip('c-b002', 'm-b002', 'B002 &amp; room tone.wav')}
${clip('c-missing', 'm-missing', 'Missing.mov')}
${clip('c-black', 'm-black', 'Black Video')}
	<ClipProjectItem ObjectUID="c-seq" ClassID="cb4e0ed7-aca1-4c8a-9c0e-5e2f1b3c4d5e" Version="1">
		<ProjectItem Version="1"><Name>${options.sequence ?? 'Main cut v3'}</Name></ProjectItem>
		<MasterClip ObjectURef="m-seq"/>
	</ClipProjectItem>
	<MasterClip ObjectUID="m-seq" ClassID="fb11c33a-b0a4-4a6b-8a4a-0f1e2d3c4b5a" Version="11">
		<Clips Version="1"><Clip Index="0" ObjectRef="30"/></Clips>
	</MasterClip>
	<SequenceSource ObjectID="30" ClassID="0d1b2c3a-4e5f-4a6b-8c7d-9e0f1a2b3c4d" Version="3">
		<Sequence ObjectURef="s-main"/>
	</SequenceSource>
${sequence('s-main', options.sequence ?? 'Main cut v3')}
${
  options.extraSequence
    ? `	<ClipProjectItem ObjectUID="c-seq2" Version="1"><ProjectItem Version="1"><Name>${options.extraSequence}</Name></ProjectItem><Sequence ObjectURef="s-second"/></ClipProjectItem>
${sequence('s-second', options.extraSequence)}`
    : ''
}
${sequence('s-deleted', 'Deleted sequence')}
${master('m-a001', 10, 'A001.mov')}
${master('m-b002', 11, 'B002 &amp; room tone.wav')}
${master('m-missing', 12, 'Missing.mov')}
${master('m-black', 13, 'Black Video')}
${source(10, 'media-a001')}
${source(11, 'media-b002')}
${source(12, 'media-missing')}
${source(13, 'media-black')}
${media('media-a001', '/Volumes/RAID/Show/media/A001.mov', '../media/A001.mov', 'A001.mov')}
${media('media-b002', 'C:\\Users\\ed\\Show\\sound\\day1\\B002 &amp; room tone.wav', null, 'B002 &amp; room tone.wav')}
${media('media-missing', '/Volumes/RAID/Show/media/Missing.mov', '../media/Missing.mov', 'Missing.mov')}
${media('media-black', '1112293707', null, 'Black Video')}
${media('media-orphan', '/Volumes/RAID/Show/media/Deleted.mov', '../media/Deleted.mov', 'Deleted.mov')}
</PremiereData>
`
}

export const premiereProject = (options?: Parameters<typeof premiereXml>[0]) => gzipSync(Buffer.from(premiereXml(options)))

/**
 * A hand-made DaVinci Resolve `.drp`: a zip of `project.xml`, a media-pool folder with one
 * timeline and a sequence container whose clips name their media files. Tag names carry `::`
 * as Resolve writes them (not well-formed XML).
 */
export async function resolveProject() {
  const zip = new JSZip()
  zip.file('project.xml', `<?xml version="1.0" encoding="UTF-8"?>\n<!--DbAppVersion="18.6.4"-->\n<Project><ListMgt::LmVersionTable DbId="1"/><Name>Show</Name></Project>\n`)
  zip.file(
    'MediaPool/Master/MpFolder.xml',
    `<?xml version="1.0" encoding="UTF-8"?>\n<!--DbAppVersion="18.6.4"-->\n<Sm2MpFolder DbId="f1"><Name>Master</Name><Items><Sm2MpTimelineClip DbId="t1"><Name>Resolve cut 1</Name><Sequence>sq1</Sequence></Sm2MpTimelineClip><Sm2MpVideoClip DbId="v1"><Name>A001.mov</Name><Media><Sm2MpMedia><MediaFilePath>/Volumes/RAID/Show/media/A001.mov</MediaFilePath></Sm2MpMedia></Media></Sm2MpVideoClip></Items></Sm2MpFolder>\n`,
  )
  zip.file(
    'SeqContainer/sq1.xml',
    `<?xml version="1.0" encoding="UTF-8"?>\n<Sm2SequenceContainer DbId="sq1"><Sm2Sequence::Tracks><Sm2TiTrack><Items><Sm2TiVideoClip DbId="c1"><Name>A001.mov</Name><MediaFilePath>/Volumes/RAID/Show/media/A001.mov</MediaFilePath><In>0|0000000000000000</In></Sm2TiVideoClip><Sm2TiAudioClip DbId="c2"><MediaFilePath>/Volumes/RAID/Show/sound/day1/B002 &amp; room tone.wav</MediaFilePath></Sm2TiAudioClip></Items></Sm2TiTrack></Sm2Sequence::Tracks></Sm2SequenceContainer>\n`,
  )
  return zip.generateAsync({ type: 'nodebuffer', compression: 'DEFLATE' })
}

export const limits = { maxFileBytes: 512 * 1024 * 1024, maxContainerBytes: 128 * 1024 * 1024, maxExpandedBytes: 4096 * 1024 * 1024, maxEntries: 20000 }
