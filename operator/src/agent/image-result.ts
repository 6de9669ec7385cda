// What the model gets for an image read_file returned. A model that accepts images sees the
// image itself (a file part in the tool result) beside a short text; any other model, or an
// image past the bounds, gets only that text: media type, size, pixel dimensions when the
// header tells them, and why the image is not shown. Sending the base64 as text instead
// would fill the context with characters the model cannot read, cut in the middle by the
// tool result bound. Only an answer of the image shape (isImageRead) whose content is base64
// (isImageData) and begins with a whole header of its media type (imageProblem) is shown as an
// image; anything else, however it starts, goes as text. Pure.
//
// Bounds: the run state in Redis is saved after every tool call and holds the step's results,
// and the conversation is saved every step; so an image is shown up to IMAGE_RESULT_LIMIT_BYTES,
// at most IMAGES_PER_STEP per step, and only the newest tool message keeps its images
// (forgetImages): older ones become the same short text, and the model reads the file again
// to look again. The transcript keeps the text only.
import type { ModelMessage } from 'ai';

/** One shown image's raw size; the toolbox reads images up to 5 MiB, providers take about this much and more. */
export const IMAGE_RESULT_LIMIT_BYTES = 1024 * 1024;
/** Images shown per step; with the size bound, at most 4 MiB of images in a saved state. */
export const IMAGES_PER_STEP = 4;

/** The image a read_file answer carries, as the toolbox contract has it. */
export interface ImageRead {
  readonly path: string;
  readonly type: 'image';
  readonly mediaType: string;
  readonly bytes: number;
  /** Base64. */
  readonly content: string;
}

export interface ShownImage {
  readonly mediaType: string;
  /** Base64. */
  readonly data: string;
}

export type ImageResult = { readonly text: string; readonly image?: ShownImage };

export interface ImageResultInput {
  readonly read: ImageRead;
  /** The run's model accepts image inputs (provider registry, or spec.model.images). */
  readonly modelAcceptsImages: boolean;
  /** Images already shown in this step. */
  readonly shownThisStep: number;
}

/**
 * Whether an answer is an image read, as the contract has one. The answer is checked, not
 * trusted: code in the sandbox runs as the toolbox's user and can write a whole answer line
 * into its output, with any path, media type, size field and content.
 */
export function isImageRead(result: unknown): result is ImageRead {
  const read = result as Partial<ImageRead> | null;
  return (
    read?.type === 'image' &&
    typeof read.path === 'string' &&
    typeof read.mediaType === 'string' &&
    /^image\/[a-z0-9][a-z0-9.+-]{0,63}$/.test(read.mediaType) &&
    typeof read.bytes === 'number' &&
    typeof read.content === 'string'
  );
}

const SHOWN = 'shown below';
/** The end of a shown image's text (describeImage), where the note says it is shown. */
const SHOWN_NOTE = /: shown below\]$/;
const NOT_IMAGE_DATA = 'not shown: its content is not base64 image data';
/** The types the toolbox returns as images (detectImage), which every image-taking provider reads. */
const SHOWN_TYPES = ['image/png', 'image/jpeg', 'image/gif', 'image/webp'] as const;
/** What of a JPEG is walked for its size; real files have a few dozen segments before it. */
const JPEG_SEGMENTS_READ = 256;
// Base64 as the toolbox writes it (Buffer#toString('base64')): no blanks, padding only at the end.
const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;

export function decideImageResult({ read, modelAcceptsImages, shownThisStep }: ImageResultInput): ImageResult {
  // The size the content decodes to, not the answer's own word for it.
  const bytes = Math.max(read.bytes, Math.floor((read.content.length * 3) / 4));
  const notShown = !modelAcceptsImages
    ? 'not shown: this model does not accept images'
    : bytes > IMAGE_RESULT_LIMIT_BYTES
      ? `not shown: images are shown up to ${IMAGE_RESULT_LIMIT_BYTES} bytes; make a smaller copy to look at it`
      : (imageProblem({ mediaType: read.mediaType, data: read.content }) ??
        (shownThisStep >= IMAGES_PER_STEP
          ? `not shown: at most ${IMAGES_PER_STEP} images are shown per step; read it again in a later step`
          : undefined));
  const text = describeImage(read, notShown ?? SHOWN);
  return notShown === undefined ? { text, image: { mediaType: read.mediaType, data: read.content } } : { text };
}

/**
 * Whether a shown image's data can go to the model as its bytes: non-empty base64. Checked
 * because the answer is not trusted (isImageRead), and the SDK refuses what is not: data that
 * starts with `data:` it takes for a data URL, which inline data must not be, and other text
 * fails its base64 decoding. It refuses while building the request, before every later model
 * call the tool message is in, so one forged answer stopped the run.
 */
export function isImageData(data: string): boolean {
  return data.length > 0 && data.length % 4 === 0 && BASE64.test(data);
}

/**
 * Why an image cannot go to the model as an image, or undefined when it can: its data is base64
 * (isImageData), its media type one of SHOWN_TYPES, and it begins with that type's magic and a
 * header giving a width and height. Providers refuse an image they cannot decode (400, "Could
 * not process image"), a rejection that fails the run; the toolbox returns an image for any
 * file that starts with the magic (a truncated PNG fixture in a repository is one), and code in
 * the sandbox can forge the answer. Only the header is decoded, not the whole image.
 */
export function imageProblem(image: ShownImage): string | undefined {
  if (!isImageData(image.data)) return NOT_IMAGE_DATA;
  if (!(SHOWN_TYPES as readonly string[]).includes(image.mediaType)) return 'not shown: only PNG, JPEG, GIF and WebP images are shown';
  const header = imageHeader(image.data);
  const size = imageTypeOf(header) === image.mediaType ? contentDimensions(image.data, header) : undefined;
  return size !== undefined && size.width > 0 && size.height > 0
    ? undefined
    : `not shown: its content is not a whole ${image.mediaType} header`;
}

/**
 * What of a kept result goes to the model: its image only when it is one (imageProblem);
 * otherwise its text, saying why the image is not shown. A result kept in the run state is read
 * back from Redis, where an older worker may have saved it unchecked.
 */
export function imageToSend(result: { readonly text: string; readonly image?: ShownImage | undefined }): ImageResult {
  if (result.image === undefined) return { text: result.text };
  const problem = imageProblem(result.image);
  if (problem === undefined) return { text: result.text, image: result.image };
  return { text: result.text.replace(SHOWN_NOTE, `: ${problem}]`) };
}

/** The short text standing for an image: `[image image/png, 1234 bytes, 640×480 px, a.png: shown below]`. */
export function describeImage(read: ImageRead, note: string): string {
  const size = contentDimensions(read.content, imageHeader(read.content));
  const dimensions = size ? `, ${size.width}×${size.height} px` : '';
  // A path is at most 4096 bytes on Linux; a longer one is not the toolbox's, and is cut.
  const path = read.path.length > 4096 ? `${read.path.slice(0, 4096)}…` : read.path;
  return `[image ${read.mediaType}, ${read.bytes} bytes${dimensions}, ${path}: ${note}]`;
}

/** The first 64 KiB of base64 image data, decoded: enough for every header but a JPEG's (contentDimensions). */
function imageHeader(data: string): Buffer {
  return Buffer.from(data.slice(0, 64 * 1024), 'base64');
}

/** The type an image's first bytes say it is: each type's magic, PNG's with its IHDR chunk, whose size imageDimensions reads. */
function imageTypeOf(bytes: Buffer): (typeof SHOWN_TYPES)[number] | undefined {
  if (bytes.length >= 16 && bytes.toString('hex', 0, 8) === '89504e470d0a1a0a' && bytes.toString('latin1', 12, 16) === 'IHDR')
    return 'image/png';
  if (bytes.length >= 3 && bytes[0] === 0xff && bytes[1] === 0xd8 && bytes[2] === 0xff) return 'image/jpeg';
  if (bytes.length >= 6 && ['GIF87a', 'GIF89a'].includes(bytes.toString('latin1', 0, 6))) return 'image/gif';
  if (bytes.length >= 12 && bytes.toString('latin1', 0, 4) === 'RIFF' && bytes.toString('latin1', 8, 12) === 'WEBP') return 'image/webp';
  return undefined;
}

/**
 * imageDimensions of base64 data whose first bytes are `header`. A JPEG's size is in the frame
 * segment after its metadata (Exif with a thumbnail, ICC profile), which can lie past the header,
 * so its segments are read from the data itself, a few bytes each.
 */
function contentDimensions(data: string, header: Buffer): { width: number; height: number } | undefined {
  return imageDimensions(header, (offset, length) => {
    // Every 4 base64 characters hold 3 bytes: decode only the characters holding these bytes.
    const skip = offset % 3;
    const first = ((offset - skip) / 3) * 4;
    return Buffer.from(data.slice(first, first + Math.ceil((skip + length) / 3) * 4), 'base64').subarray(skip, skip + length);
  });
}

/** `length` bytes at `offset` of an image, fewer at its end. */
type ByteReader = (offset: number, length: number) => Buffer;

/**
 * Width and height from a PNG, GIF, JPEG or WebP header; undefined when it does not say. A JPEG's
 * segments are read with `read` when given (the header may end before its size), else from `bytes`.
 */
export function imageDimensions(bytes: Buffer, read?: ByteReader): { width: number; height: number } | undefined {
  if (bytes.length >= 24 && bytes.readUInt32BE(0) === 0x89504e47) return { width: bytes.readUInt32BE(16), height: bytes.readUInt32BE(20) };
  if (bytes.length >= 10 && bytes.toString('latin1', 0, 3) === 'GIF')
    return { width: bytes.readUInt16LE(6), height: bytes.readUInt16LE(8) };
  if (bytes.length >= 30 && bytes.toString('latin1', 0, 4) === 'RIFF' && bytes.toString('latin1', 8, 12) === 'WEBP') return webpSize(bytes);
  if (bytes.length >= 4 && bytes[0] === 0xff && bytes[1] === 0xd8)
    return jpegSize(read ?? ((offset, length) => bytes.subarray(offset, offset + length)));
  return undefined;
}

function webpSize(bytes: Buffer): { width: number; height: number } | undefined {
  const chunk = bytes.toString('latin1', 12, 16);
  if (chunk === 'VP8X') return { width: 1 + bytes.readUIntLE(24, 3), height: 1 + bytes.readUIntLE(27, 3) };
  if (chunk === 'VP8 ') return { width: bytes.readUInt16LE(26) & 0x3fff, height: bytes.readUInt16LE(28) & 0x3fff };
  if (chunk === 'VP8L' && bytes.length >= 25) {
    const bits = bytes.readUInt32LE(21);
    return { width: 1 + (bits & 0x3fff), height: 1 + ((bits >> 14) & 0x3fff) };
  }
  return undefined;
}

// Walks the segments to the first start-of-frame marker, which holds the size; a bounded number
// of them, as forged data can be all tiny segments.
function jpegSize(read: ByteReader): { width: number; height: number } | undefined {
  let at = 2;
  for (let segment = 0; segment < JPEG_SEGMENTS_READ; segment += 1) {
    const bytes = read(at, 9);
    if (bytes.length < 9 || bytes[0] !== 0xff) return undefined;
    const marker = bytes[1]!;
    const isFrame = marker >= 0xc0 && marker <= 0xcf && marker !== 0xc4 && marker !== 0xc8 && marker !== 0xcc;
    if (isFrame) return { width: bytes.readUInt16BE(7), height: bytes.readUInt16BE(5) };
    at += 2 + bytes.readUInt16BE(2);
  }
  return undefined;
}

/**
 * The conversation with every image replaced by its text, so the saved state and later
 * requests carry images of the newest tool message only. Messages without images are kept as
 * they are (same objects).
 */
export function forgetImages(messages: readonly ModelMessage[]): ModelMessage[] {
  return messages.map((message) => {
    if (message.role !== 'tool' || !message.content.some((part) => part.type === 'tool-result' && part.output.type === 'content'))
      return message;
    const content = message.content.map((part) => {
      if (part.type !== 'tool-result' || part.output.type !== 'content') return part;
      const texts = part.output.value.flatMap((item) => (item.type === 'text' ? [item.text] : []));
      const text = texts.join('\n').replace(/: shown below\]/g, ': no longer shown; read the file again to look at it]');
      return { ...part, output: { type: 'text' as const, value: text } };
    });
    return { ...message, content };
  });
}
