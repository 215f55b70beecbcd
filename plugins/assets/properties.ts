/** The technical metadata properties analysis writes (GET /available_metadata_properties). */
export const METADATA_PROPERTIES = [
  { name: 'container', type: 'string', label: 'Container format', applies_to: ['video', 'audio', 'image'] },
  { name: 'duration', type: 'number', label: 'Duration (s)', applies_to: ['video', 'audio'] },
  { name: 'bit_rate', type: 'number', label: 'Bit rate (bit/s)', applies_to: ['video', 'audio'] },
  { name: 'video_codec', type: 'string', label: 'Video codec', applies_to: ['video'] },
  { name: 'video_profile', type: 'string', label: 'Video profile', applies_to: ['video'] },
  { name: 'width', type: 'number', label: 'Width (px)', applies_to: ['video', 'image'] },
  { name: 'height', type: 'number', label: 'Height (px)', applies_to: ['video', 'image'] },
  { name: 'frame_rate', type: 'number', label: 'Frame rate (fps)', applies_to: ['video'] },
  { name: 'pixel_format', type: 'string', label: 'Pixel format', applies_to: ['video'] },
  { name: 'field_order', type: 'string', label: 'Field order', applies_to: ['video'] },
  { name: 'audio_codec', type: 'string', label: 'Audio codec', applies_to: ['video', 'audio'] },
  { name: 'audio_channels', type: 'number', label: 'Audio channels', applies_to: ['video', 'audio'] },
  { name: 'audio_streams', type: 'number', label: 'Audio streams', applies_to: ['video', 'audio'] },
  { name: 'sample_rate', type: 'number', label: 'Sample rate (Hz)', applies_to: ['video', 'audio'] },
  { name: 'start_timecode', type: 'string', label: 'Start timecode', applies_to: ['video', 'audio'] },
  { name: 'reel_name', type: 'string', label: 'Reel name', applies_to: ['video', 'audio'] },
  { name: 'clip_name', type: 'string', label: 'Clip name', applies_to: ['video', 'audio', 'image'] },
  { name: 'creation_date', type: 'date', label: 'Creation date', applies_to: ['video', 'audio', 'image'] },
  { name: 'color_space', type: 'string', label: 'Colour space', applies_to: ['image'] },
  { name: 'channels', type: 'number', label: 'Colour channels', applies_to: ['image'] },
  { name: 'density', type: 'number', label: 'Density (dpi)', applies_to: ['image'] },
  { name: 'camera_make', type: 'string', label: 'Camera make (EXIF)', applies_to: ['image'] },
  { name: 'camera_model', type: 'string', label: 'Camera model (EXIF)', applies_to: ['image'] },
  { name: 'exposure_time', type: 'number', label: 'Exposure time (EXIF)', applies_to: ['image'] },
  { name: 'f_number', type: 'number', label: 'F-number (EXIF)', applies_to: ['image'] },
  { name: 'iso', type: 'number', label: 'ISO (EXIF)', applies_to: ['image'] },
  { name: 'focal_length', type: 'number', label: 'Focal length (EXIF)', applies_to: ['image'] },
  { name: 'lens_model', type: 'string', label: 'Lens (EXIF)', applies_to: ['image'] },
] as const

/**
 * What another plugin does with some of these properties, shown by GET /settings/metadata_properties
 * as a flag on each (`searchable: true`). Assets knows no such plugin: the search plugin, which
 * depends on assets, adds its whitelist in its `start` (like projects' path-move hooks).
 */
export interface PropertyUse {
  /** the flag's name on each property (`searchable`) */
  flag: string
  /** the properties it applies to now (read on each request: a setting can change it live) */
  names(): readonly string[]
}

/** Resolved as `assetServices.propertyUses`. */
export class PropertyUses {
  private readonly uses: PropertyUse[] = []
  add(use: PropertyUse): void {
    this.uses.push(use)
  }
  /** the properties with each use's flag */
  describe(): Array<(typeof METADATA_PROPERTIES)[number] & Record<string, unknown>> {
    const flags = this.uses.map((u) => ({ flag: u.flag, names: new Set(u.names()) }))
    return METADATA_PROPERTIES.map((p) => ({ ...p, ...Object.fromEntries(flags.map((f) => [f.flag, f.names.has(p.name)])) }))
  }
}
