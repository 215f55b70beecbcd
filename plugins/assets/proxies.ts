import { spawn } from 'node:child_process'
import path from 'node:path'
import sharp from 'sharp'
import type { Asset } from './entities.js'

export interface ProxySettings {
  /** low-res height in pixels (never upscaled) */
  height: number
  /** x264 constant rate factor */
  crf: number
  /** caps the low-res video bit rate (kbit/s) for streaming over thin lines; null: quality (crf) alone decides */
  maxBitrateKbps: number | null
  audioBitrate: string
  /** editing proxy height */
  editingHeight: number
  /** frames in the thumbnail strip */
  thumbnails: number
}

export const DEFAULT_PROXY_SETTINGS: ProxySettings = { height: 540, crf: 23, maxBitrateKbps: null, audioBitrate: '128k', editingHeight: 720, thumbnails: 10 }

/** the low-res H.264 options: constant quality, capped when a maximum bit rate is set */
const h264 = (s: ProxySettings) => [
  '-c:v', 'libx264', '-preset', 'veryfast', '-crf', String(s.crf), '-profile:v', 'high',
  ...(s.maxBitrateKbps ? ['-maxrate', `${s.maxBitrateKbps}k`, '-bufsize', `${2 * s.maxBitrateKbps}k`] : []),
]

/** Runs ffmpeg with an argument array (never a shell), local files only; rejects with its last error lines. */
export function ffmpeg(binary: string, args: string[], signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(binary, ['-hide_banner', '-nostdin', '-y', '-v', 'error', ...args], { stdio: ['ignore', 'ignore', 'pipe'], signal })
    let stderr = ''
    child.stderr.on('data', (d) => (stderr = (stderr + d).slice(-4000)))
    child.on('error', reject)
    child.on('close', (code) => (code === 0 ? resolve() : reject(new Error(`ffmpeg failed (${code}): ${stderr.trim().split('\n').slice(-3).join(' | ')}`))))
  })
}

/** `file:` keeps a file name from being read as a protocol (`concat:`, `http:` …) */
const input = (file: string) => ['-protocol_whitelist', 'file', '-i', `file:${file}`]

const timecodeArgs = (asset: Asset) => {
  const tc = (asset.metadata as Record<string, unknown>).start_timecode
  return typeof tc === 'string' && /^\d{2}:\d{2}:\d{2}[:;]\d{2}$/.test(tc) ? ['-timecode', tc] : []
}

/**
 * Builds the plaintext proxies of one asset in `workDir` and returns them by kind. Video: a
 * browser-playable H.264/AAC MP4 with faststart and the source's start timecode, a poster frame and a
 * thumbnail strip. Audio: an AAC proxy and a waveform. Stills: a WebP image and a poster.
 */
export async function buildProxies(bin: string, asset: Asset, source: string, workDir: string, s: ProxySettings, signal?: AbortSignal): Promise<Record<string, string>> {
  const out = (name: string) => path.join(workDir, name)
  const duration = asset.duration ?? 0
  if (asset.type === 'video') {
    // one decode: the scaled picture is split into the low-res encode, the poster (at 10 %, at
    // most 10 s in) and the thumbnail strip, all outputs of the same ffmpeg run
    const posterAt = Math.min(duration * 0.1, 10).toFixed(3)
    const fps = (duration > 0 ? s.thumbnails / duration : 1).toFixed(6)
    const graph = [
      `[0:v:0]scale=-2:'min(${s.height},ih)':flags=bicubic,format=yuv420p,split=3[lowres][p][t]`,
      `[p]setpts=PTS-STARTPTS,trim=start=${posterAt},format=yuvj420p[poster]`,
      `[t]setpts=PTS-STARTPTS,fps=${fps},scale=160:-2,tile=${s.thumbnails}x1,format=yuvj420p[thumbnails]`,
    ].join(';')
    await ffmpeg(
      bin,
      [
        ...input(source),
        '-filter_complex', graph,
        '-map', '[lowres]', '-map', '0:a:0?',
        ...h264(s),
        '-c:a', 'aac', '-b:a', s.audioBitrate, '-ac', '2',
        ...timecodeArgs(asset),
        '-movflags', '+faststart', out('lowres.mp4'),
        '-map', '[poster]', '-frames:v', '1', '-q:v', '3', out('poster.jpg'),
        '-map', '[thumbnails]', '-frames:v', '1', '-q:v', '4', out('thumbnails.jpg'),
      ],
      signal,
    )
    return { lowres: out('lowres.mp4'), poster: out('poster.jpg'), thumbnails: out('thumbnails.jpg') }
  }
  if (asset.type === 'audio') {
    await ffmpeg(bin, [...input(source), '-map', '0:a:0', '-vn', '-c:a', 'aac', '-b:a', s.audioBitrate, '-ac', '2', '-movflags', '+faststart', out('audio.m4a')], signal)
    await ffmpeg(bin, [...input(source), '-filter_complex', 'aformat=channel_layouts=mono,showwavespic=s=1200x200:colors=0x3a86ff', '-frames:v', '1', out('waveform.png')], signal)
    return { audio: out('audio.m4a'), waveform: out('waveform.png') }
  }
  if (asset.type === 'image') {
    const image = sharp(source, { limitInputPixels: 268_402_689 }).rotate()
    await image.clone().resize({ width: 1920, height: 1920, fit: 'inside', withoutEnlargement: true }).webp({ quality: 82 }).toFile(out('image.webp'))
    await image.clone().resize({ width: 480, height: 480, fit: 'inside', withoutEnlargement: true }).jpeg({ quality: 80 }).toFile(out('poster.jpg'))
    return { image: out('image.webp'), poster: out('poster.jpg') }
  }
  return {}
}

/** ProRes Proxy in a .mov that keeps the clip name, frame rate and start timecode, so an NLE can relink. */
export async function buildEditingProxy(bin: string, asset: Asset, source: string, target: string, s: ProxySettings, signal?: AbortSignal): Promise<void> {
  const meta = asset.metadata as Record<string, unknown>
  await ffmpeg(
    bin,
    [
      ...input(source),
      '-map', '0:v:0', '-map', '0:a?',
      '-vf', `scale=-2:'min(${s.editingHeight},ih)'`,
      '-c:v', 'prores_ks', '-profile:v', '0', '-vendor', 'apl0', '-pix_fmt', 'yuv422p10le',
      '-c:a', 'pcm_s16le',
      ...timecodeArgs(asset),
      '-metadata', `title=${String(meta.clip_name ?? asset.name)}`,
      ...(meta.reel_name ? ['-metadata', `reel_name=${String(meta.reel_name)}`] : []),
      target,
    ],
    signal,
  )
}

/** a low-res copy with the running timecode burnt in (reburn_timecode) */
export async function burnTimecode(bin: string, asset: Asset, source: string, target: string, s: ProxySettings, signal?: AbortSignal): Promise<void> {
  const meta = asset.metadata as Record<string, unknown>
  const rate = Number(meta.frame_rate) || 25
  const tc = typeof meta.start_timecode === 'string' ? meta.start_timecode : '00:00:00:00'
  const text = `drawtext=timecode='${tc.replace(/:/g, '\\:')}':rate=${rate}:fontcolor=white:fontsize=h/18:box=1:boxcolor=black@0.6:x=(w-tw)/2:y=h-th-h/20`
  await ffmpeg(
    bin,
    [...input(source), '-map', '0:v:0', '-map', '0:a:0?', '-vf', `scale=-2:'min(${s.height},ih)',${text},format=yuv420p`, ...h264(s), '-c:a', 'aac', '-b:a', s.audioBitrate, '-ac', '2', ...timecodeArgs(asset), '-movflags', '+faststart', target],
    signal,
  )
}
