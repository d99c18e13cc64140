/*
 * tally/api.h: TALLY_API marks the functions and data that libtally
 * exports.  The library is built with hidden visibility, so everything
 * not marked stays inside it; the only internal (tally__) names exported
 * are those that the inline update path of a public header uses.
 */
#ifndef TALLY_API_H
#define TALLY_API_H

#if defined(__GNUC__)
#define TALLY_API __attribute__((visibility("default")))
#else
#define TALLY_API
#endif

#endif /* TALLY_API_H */
