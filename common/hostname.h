/* hostname — DNS hostname checks shared by the API validators and the node's config parser (pure).
 */
#ifndef CDNCA_HOSTNAME_H
#define CDNCA_HOSTNAME_H

/* 1 when name is a valid lowercase DNS hostname: labels of 1-63 letters, digits or '-' (not at
   either end of a label), separated by single dots, 253 characters at most. */
int hostname_valid(const char *name);

/* Lowercase s in place (ASCII). */
void hostname_lower(char *s);

#endif
