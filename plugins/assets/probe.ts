import path from 'node:path'
import sharp from 'sharp'
import exifReader from 'exif-reader'
import type { AssetType } from './entities.js'

export interface Analysis {
  type: AssetType
  duration: number | null
  metadata: Record<string, unknown>
}

const IMAGE_EXTENSIONS = new Set(['.jpg', '.jpeg', '.png', '.tif', '.tiff', '.webp', '.gif', '.heic', '.heif', '.avif', '.bmp', '.dpx', '.exr'])
// containers ffprobe reports for still images
const IMAGE_FORMATS = /(^|,)(image2|png_pipe|jpeg_pipe|tiff_pipe|webp_pipe|bmp_pipe|gif|dpx_pipe|exr_pipe)(,|$)/

/** "30000/1001" → 29.97 */
export function rate(value: string | undefined): number | null {
  if (!value) return null
  const [n, d] = value.split('/').map(Number)
  if (!d || !Number.isFinite(n / d) || n === 0) return null
  return Math.round((n / d) * 1000) / 1000
}

/**
 * ffmpeg's text-art "video" decoders (ANSI art, BinText, XBin, iCEDraw). Their demuxers take almost
 * any bytes (one random 100 KB file in ~40 probes as BinText), which made random binary uploads
 * "videos" whose proxies could not be built (the fault campaign's failing proxy jobs): not media.
 */
const TEXT_ART_CODECS = new Set(['ansi', 'bintext', 'xbin', 'idf'])

const num = (v: unknown) => (v === undefined || v === null || v === '' || Number.isNaN(Number(v)) ? null : Number(v))

/**
 * Technical metadata of a media file: ffprobe for anything with streams (`ffprobe` runs it with the
 * given arguments and answers its output), sharp (and its EXIF) for stills. `file` is a server-made
 * path (the checked original, `originals.ts`) passed as one argument with the `file:` protocol, so a
 * file name can never act as an ffprobe option or protocol (SECURITY.md); `name` is the asset's file
 * name, for its extension and the clip name.
 */
export async function analyse(ffprobe: ((args: string[]) => Promise<string>) | null, file: string, name: string): Promise<Analysis> {
  const ext = path.extname(name).toLowerCase()
  if (IMAGE_EXTENSIONS.has(ext) && ext !== '.gif') {
    const still = await analyseStill(file, name).catch(() => null)
    if (still) return still
  }
  if (!ffprobe) throw Object.assign(new Error('ffprobe is not available on this server'), { permanent: true })
  let probe: any
  try {
    probe = JSON.parse(await ffprobe(['-v', 'error', '-print_format', 'json', '-show_format', '-show_streams', '-protocol_whitelist', 'file', `file:${file}`]))
  } catch (err) {
    // a lost helper process is the server's trouble, not the file's: fail, and the job is retried
    if ((err as { launcher?: boolean }).launcher) throw err
    return { type: 'other', duration: null, metadata: { container: null } }
  }
  const streams: any[] = probe.streams ?? []
  const format = probe.format ?? {}
  const video = streams.find((s) => s.codec_type === 'video' && !s.disposition?.attached_pic && !TEXT_ART_CODECS.has(s.codec_name))
  const audio = streams.filter((s) => s.codec_type === 'audio')
  // QuickTime keeps the reel name (and the timecode) in the timecode track, a data stream of its own
  const timecodeTrack = streams.find((s) => s.codec_type === 'data' && (s.codec_tag_string === 'tmcd' || lower(s.tags).handler_name === 'TimeCodeHandler'))
  const tags = { ...lower(timecodeTrack?.tags), ...lower(format.tags), ...lower(video?.tags) }
  const timecode = tags.timecode ?? streams.map((s) => lower(s.tags).timecode).find(Boolean) ?? null
  const isImage = IMAGE_FORMATS.test(format.format_name ?? '') && !audio.length
  const type: AssetType = isImage ? 'image' : video ? 'video' : audio.length ? 'audio' : 'other'
  const duration = type === 'image' ? null : num(format.duration)
  const metadata: Record<string, unknown> = {
    container: format.format_name ?? null,
    duration,
    bit_rate: num(format.bit_rate),
    creation_date: tags.creation_time ?? null,
    start_timecode: timecode,
    reel_name: tags.reel_name ?? tags['com.apple.quicktime.reel'] ?? tags.tape_name ?? null,
    clip_name: tags.title ?? path.basename(name, path.extname(name)),
  }
  if (video) {
    Object.assign(metadata, {
      video_codec: video.codec_name ?? null,
      video_profile: video.profile ?? null,
      width: num(video.width),
      height: num(video.height),
      frame_rate: rate(video.avg_frame_rate) ?? rate(video.r_frame_rate),
      pixel_format: video.pix_fmt ?? null,
      field_order: video.field_order ?? null,
    })
  }
  if (audio.length) {
    Object.assign(metadata, {
      audio_codec: audio[0].codec_name ?? null,
      audio_channels: audio.reduce((n, s) => n + (num(s.channels) ?? 0), 0),
      audio_streams: audio.length,
      sample_rate: num(audio[0].sample_rate),
    })
  }
  return { type, duration, metadata }
}

async function analyseStill(file: string, name: string): Promise<Analysis> {
  const meta = await sharp(file, { limitInputPixels: 268_402_689 }).metadata()
  const metadata: Record<string, unknown> = {
    container: meta.format ?? null,
    width: meta.width ?? null,
    height: meta.height ?? null,
    color_space: meta.space ?? null,
    channels: meta.channels ?? null,
    density: meta.density ?? null,
    clip_name: path.basename(name, path.extname(name)),
  }
  if (meta.exif) {
    try {
      const exif = exifReader(meta.exif) as any
      const photo = exif.Photo ?? exif.exif ?? {}
      const image = exif.Image ?? exif.image ?? {}
      Object.assign(metadata, {
        camera_make: image.Make ?? null,
        camera_model: image.Model ?? null,
        creation_date: toIso(photo.DateTimeOriginal ?? image.DateTime),
        exposure_time: photo.ExposureTime ?? null,
        f_number: photo.FNumber ?? null,
        iso: photo.ISOSpeedRatings ?? photo.PhotographicSensitivity ?? null,
        focal_length: photo.FocalLength ?? null,
        lens_model: photo.LensModel ?? null,
      })
    } catch {
      // unreadable EXIF is not a reason to fail the analysis
    }
  }
  return { type: 'image', duration: null, metadata }
}

const toIso = (d: unknown) => (d instanceof Date && !Number.isNaN(d.getTime()) ? d.toISOString() : typeof d === 'string' ? d : null)
const lower = (tags: Record<string, unknown> | undefined) =>
  Object.fromEntries(Object.entries(tags ?? {}).map(([k, v]) => [k.toLowerCase(), v as string])) as Record<string, string>
